module go.uber.org/zap

go 1.19

require (
	github.com/stretchr/testify v1.8.1
	go.uber.org/goleak v1.3.0
	go.uber.org/multierr v1.10.0
	go.yaml.in/yaml/v3 v3.0.4
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

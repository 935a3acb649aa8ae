// Not a module to import: this go.mod only keeps the trimmed standard-library
// files below out of Halite's ./... (they are package crypto/tls etc., built
// only through `go build -overlay`; see HALITE.md).
module halite.invalid/gotrim

go 1.26

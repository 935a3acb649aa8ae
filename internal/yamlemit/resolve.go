package yamlemit

import (
	"encoding/base64"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Short tags, as go-yaml spells them.
const (
	strTag    = "!!str"
	seqTag    = "!!seq"
	mapTag    = "!!map"
	binaryTag = "!!binary"
)

const longTagPrefix = "tag:yaml.org,2002:"

func shortTag(tag string) string {
	if strings.HasPrefix(tag, longTagPrefix) {
		return "!!" + tag[len(longTagPrefix):]
	}
	return tag
}

// resolve is the tag go-yaml's resolver gives the plain scalar s: what s
// reads back as when written unquoted. It asks go-yaml's own resolver
// (through Node.ShortTag), which the decoder links anyway.
func resolve(s string) string {
	return (&yaml.Node{Kind: yaml.ScalarNode, Value: s}).ShortTag()
}

// isBase60Float matches go-yaml's base60float,
// ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$: YAML 1.1
// sexagesimal numbers, which the encoder quotes.
func isBase60Float(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return false
	}
	i++
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
		i++
	}
	groups := 0
	for i < len(s) && s[i] == ':' {
		i++
		// [0-5]?[0-9]: one or two digits, a first of two at most 5.
		switch {
		case i+1 < len(s) && s[i] >= '0' && s[i] <= '5' && s[i+1] >= '0' && s[i+1] <= '9':
			i += 2
		case i < len(s) && s[i] >= '0' && s[i] <= '9':
			i++
		default:
			return false
		}
		groups++
	}
	if groups == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
			i++
		}
	}
	return i == len(s)
}

// isOldBool is YAML 1.1's bool words (y, yes, on, n, no, off, each in
// lower case, capitalised or upper case), which the encoder quotes.
func isOldBool(s string) bool {
	l := strings.ToLower(s)
	switch l {
	case "y", "yes", "on", "n", "no", "off":
		return s == l || s[1:] == l[1:] || s == strings.ToUpper(l)
	}
	return false
}

// encodeBase64 is go-yaml's: lines of 70 characters, each ending in a line
// break once there is more than one.
func encodeBase64(s string) string {
	const lineLen = 70
	enc := base64.StdEncoding.EncodeToString([]byte(s))
	if len(enc) < lineLen {
		return enc
	}
	var b strings.Builder
	for i := 0; i < len(enc); i += lineLen {
		b.WriteString(enc[i:min(i+lineLen, len(enc))])
		b.WriteByte('\n')
	}
	return b.String()
}

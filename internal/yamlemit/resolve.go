package yamlemit

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Short tags, as go-yaml spells them.
const (
	nullTag      = "!!null"
	boolTag      = "!!bool"
	strTag       = "!!str"
	intTag       = "!!int"
	floatTag     = "!!float"
	timestampTag = "!!timestamp"
	seqTag       = "!!seq"
	mapTag       = "!!map"
	binaryTag    = "!!binary"
	mergeTag     = "!!merge"
)

const longTagPrefix = "tag:yaml.org,2002:"

func shortTag(tag string) string {
	if strings.HasPrefix(tag, longTagPrefix) {
		return "!!" + tag[len(longTagPrefix):]
	}
	return tag
}

func longTag(tag string) string {
	if strings.HasPrefix(tag, "!!") {
		return longTagPrefix + tag[2:]
	}
	return tag
}

// resolve is the tag go-yaml's resolver (resolve.go, resolve("", s))
// gives the plain scalar s: what s reads back as when written unquoted.
func resolve(s string) string {
	if s == "" {
		return nullTag
	}
	switch s[0] {
	case 'y', 'Y', 'n', 'N', 't', 'T', 'f', 'F', 'o', 'O', '~', '<':
		return resolveWord(s)
	case '.':
		if t := resolveWord(s); t != strTag {
			return t
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return floatTag
		}
		return strTag
	case '+', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if t := resolveWord(s); t != strTag {
			return t
		}
		return resolveNumber(s)
	}
	return strTag
}

// resolveWord is go-yaml's resolveMap: the words read as a bool, null,
// infinity, NaN or merge key.
func resolveWord(s string) string {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return boolTag
	case "~", "null", "Null", "NULL":
		return nullTag
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return floatTag
	case "<<":
		return mergeTag
	}
	return strTag
}

// resolveNumber is go-yaml's 'D' and 'S' case: a timestamp, an int in any
// base strconv reads (underscores dropped), a YAML float, 0b/0o ints.
func resolveNumber(in string) string {
	if isTimestamp(in) {
		return timestampTag
	}
	plain := strings.ReplaceAll(in, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return intTag
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return intTag
	}
	if isYAMLFloat(plain) {
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			return floatTag
		}
	}
	switch {
	case strings.HasPrefix(plain, "0b"):
		if _, err := strconv.ParseInt(plain[2:], 2, 64); err == nil {
			return intTag
		}
		if _, err := strconv.ParseUint(plain[2:], 2, 64); err == nil {
			return intTag
		}
	case strings.HasPrefix(plain, "-0b"):
		if _, err := strconv.ParseInt("-"+plain[3:], 2, 64); err == nil {
			return intTag
		}
	case strings.HasPrefix(plain, "0o"):
		if _, err := strconv.ParseInt(plain[2:], 8, 64); err == nil {
			return intTag
		}
		if _, err := strconv.ParseUint(plain[2:], 8, 64); err == nil {
			return intTag
		}
	case strings.HasPrefix(plain, "-0o"):
		if _, err := strconv.ParseInt("-"+plain[3:], 8, 64); err == nil {
			return intTag
		}
	}
	return strTag
}

// isYAMLFloat matches go-yaml's yamlStyleFloat,
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$, without regexp.
func isYAMLFloat(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := digits(s, i)
		if j == i {
			return false
		}
		i = j
	} else {
		j := digits(s, i)
		if j == i {
			return false
		}
		i = j
		if i < len(s) && s[i] == '.' {
			i = digits(s, i+1)
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
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

// isOldBool is YAML 1.1's bool words, which the encoder quotes.
func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

var timestampFormats = []string{
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
	"2006-1-2",
}

// isTimestamp is go-yaml's parseTimestamp: four digits, a dash, then one of
// the layouts time.Parse reads.
func isTimestamp(s string) bool {
	i := digits(s, 0)
	if i != 4 || i == len(s) || s[i] != '-' {
		return false
	}
	for _, f := range timestampFormats {
		if _, err := time.Parse(f, s); err == nil {
			return true
		}
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

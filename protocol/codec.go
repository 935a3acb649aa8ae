package protocol

import (
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// Hard limits of the decoder. They are checked by the CBOR library while it
// validates a message, before it allocates for the values.
const (
	MaxNesting       = 32      // maps and arrays inside each other
	MaxElements      = 1 << 16 // items of one array, pairs of one map
	MaxContainers    = 1 << 16 // maps and arrays in one message, all levels
	DefaultMaxFrame  = 4 << 20 // bytes of one frame, type byte included
	MinMaxFrameLimit = 1 << 10 // smallest frame limit a reader accepts
)

var (
	encMode cbor.UserBufferEncMode // Marshal, and MarshalToBuffer for Framer.Write
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.EncOptions{
		Sort:          cbor.SortCoreDeterministic,
		IndefLength:   cbor.IndefLengthForbidden,
		Time:          cbor.TimeUnixMicro,
		ShortestFloat: cbor.ShortestFloat16,
	}.UserBufferEncMode()
	if err != nil {
		panic(fmt.Sprintf("protocol: cbor encoder options: %v", err))
	}
	// Only false, true and null are accepted among CBOR's simple values;
	// the others would reach callers as cbor.SimpleValue inside any fields.
	var rejected []func(*cbor.SimpleValueRegistry) error
	for sv := 0; sv < 256; sv++ {
		if (sv >= 20 && sv <= 22) || (sv >= 24 && sv <= 31) {
			continue
		}
		rejected = append(rejected, cbor.WithRejectedSimpleValue(cbor.SimpleValue(sv)))
	}
	simple, err := cbor.NewSimpleValueRegistryFromDefaults(rejected...)
	if err != nil {
		panic(fmt.Sprintf("protocol: cbor simple values: %v", err))
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   MaxNesting,
		MaxArrayElements:  MaxElements,
		MaxMapPairs:       MaxElements,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		UTF8:              cbor.UTF8RejectInvalid,
		IntDec:            cbor.IntDecConvertSigned,
		ExtraReturnErrors: cbor.ExtraDecErrorNone,
		SimpleValues:      simple,
	}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("protocol: cbor decoder options: %v", err))
	}
}

// Marshal encodes v as deterministic CBOR.
func Marshal(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cbor encode: %w", err)
	}
	return b, nil
}

// Unmarshal decodes CBOR data into v with the strict decoder: duplicate map
// keys, indefinite lengths and tags are refused; nesting and element counts
// are limited, and so is the number of maps and arrays in all (each costs far
// more decoded than its one byte on the wire); maps decode into
// map[string]any, so a map with a key that is not a text string is refused;
// simple values other than false, true and null are refused. The error is a
// *ProtoError of KindMalformed (or KindTooLarge for a limit).
func Unmarshal(data []byte, v any) error {
	if tooManyContainers(data, MaxContainers) {
		return Errorf(KindTooLarge, "cbor decode: more than %d maps and arrays", MaxContainers)
	}
	if err := decMode.Unmarshal(data, v); err != nil {
		k := KindMalformed
		switch err.(type) {
		case *cbor.MaxNestedLevelError, *cbor.MaxArrayElementsError, *cbor.MaxMapPairsError:
			k = KindTooLarge
		}
		return &ProtoError{Kind: k, Msg: "cbor decode: " + err.Error()}
	}
	return nil
}

// tooManyContainers reports whether data holds more than max array and map
// heads. It reads only item heads, skipping string contents, so it needs no
// recursion and allocates nothing; input it cannot follow (truncated,
// indefinite, reserved) ends the count and is left to the decoder to refuse.
func tooManyContainers(data []byte, max int) bool {
	n := 0
	for off := 0; off < len(data); {
		major, ai := data[off]>>5, data[off]&0x1f
		off++
		var arg uint64
		switch {
		case ai < 24:
			arg = uint64(ai)
		case ai <= 27:
			w := 1 << (ai - 24)
			if w > len(data)-off {
				return false
			}
			for _, c := range data[off : off+w] {
				arg = arg<<8 | uint64(c)
			}
			off += w
		default:
			return false
		}
		switch major {
		case 2, 3: // byte and text strings: skip the contents
			if arg > uint64(len(data)-off) {
				return false
			}
			off += int(arg)
		case 4, 5:
			if n++; n > max {
				return true
			}
		}
	}
	return false
}

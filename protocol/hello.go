package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen is the longest agent id accepted, in bytes. An id is a file name
// on the master (pki_dir/minions/<id>, cachedir/minions/<id>.grains.tmp):
// 255 bytes is the longest name of ext4, XFS, Btrfs, ZFS and tmpfs
// (NAME_MAX); less the longest suffix the master adds to an id in a file
// name (".grains.tmp", 11 bytes), rounded down to 240.
const MaxIDLen = 240

// Hello is the first message of a connection, agent to master: the id the
// agent claims (its key comes from the TLS handshake), its version and
// capability number, and its grains so the master can match targets.
type Hello struct {
	ID      string         `cbor:"1,keyasint"`
	Version string         `cbor:"2,keyasint"`
	Caps    uint32         `cbor:"3,keyasint"`
	Grains  map[string]any `cbor:"4,keyasint,omitempty"`
	Relay   bool           `cbor:"5,keyasint,omitempty"` // the agent is a relay
	// KX is the agent's ephemeral X25519 public key and KXSig its
	// signature (SignAgentKX), to agree a session MAC key (see KX).
	KX    []byte `cbor:"6,keyasint,omitempty"`
	KXSig []byte `cbor:"7,keyasint,omitempty"`
	// Returners are the agent's `return:` option: returners the master
	// also sends every return of this agent to (capability 3).
	Returners []string `cbor:"8,keyasint,omitempty"`
	// Pub is the agent's ed25519 public key, set by a relay that forwards
	// a device's Hello on its upstream link (capability 5); on a direct
	// connection the key comes from the TLS handshake and Pub is empty.
	// The master believes it only with a KXSig that verifies under it.
	Pub []byte `cbor:"9,keyasint,omitempty"`
	// Proxy says that the Hello is of a proxy minion: a device that
	// cannot run the agent, whose agent is the relay that forwards the
	// Hello. Pub is then a key that relay made and holds for it (in its
	// pki_dir/proxy), and KXSig is made with it. The master accepts a
	// proxy Hello only on a relay link, binds the id to that relay (no
	// other relay may speak for it, and an id with a key of its own is
	// not turned into a proxy minion), and lists its key as "proxied by"
	// the relay: its returns are as good as the relay's word, no more.
	// No capability: a master that predates it ignores the field and
	// sees a relayed device (the key listing does not say proxied).
	Proxy bool `cbor:"10,keyasint,omitempty"`
}

func (*Hello) Type() Type { return TypeHello }

func (h *Hello) validate() error {
	if h.Pub != nil && len(h.Pub) != 32 {
		return Errorf(KindMalformed, "hello key is %d bytes, want 32", len(h.Pub))
	}
	return ValidID(h.ID)
}

// idForbidden are the characters no id may hold: path separators (Salt's
// salt/utils/verify.py valid_id refuses '/', '\\' and NUL), and the
// metacharacters of Salt's key and target matching: '*', '?', '[' and ']'
// of its fnmatch globs, and ',' which salt/key.py Key.name_match splits a
// match on. An id holding one of them, interpolated into a key match
// (wheel key.accept match: {{ data['id'] }}) or a target, would select
// other ids than itself.
const idForbidden = "/\\*?[],"

// idWords are ids refused whole: the operators of Salt's compound matcher
// (salt/matchers/compound_match.py opers), which a target holding the id
// would read as an operator.
var idWords = [...]string{"and", "or", "not", "(", ")"}

// ValidID checks an agent id. Salt's own rule (salt/utils/verify.py
// valid_id: no '/', '\\' or NUL, and pki_dir/<id> must name a file right
// under pki_dir, so not "" "." or "..") is the floor; an id must also be
// usable as an exact name wherever Salt reads a pattern (key matches,
// targets) and as a file name. So an id is 1 to MaxIDLen bytes of UTF-8
// with:
//   - no control, format (zero-width, bidirectional) or space characters;
//   - none of / \ * ? [ ] , (see idForbidden);
//   - no leading '.' (salt-key lists no file whose name starts with one),
//     '-' (it would read as a flag of halite-key) or "..";
//   - no engine prefix of Salt's compound matcher (G@ P@ I@ J@ L@ N@ S@ E@
//     R@, or G, P, I, J with a delimiter: G|@), and not one of its
//     operators (and, or, not, parentheses) as a whole.
//
// The error is a KindMalformed *ProtoError saying what is wrong.
func ValidID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return Errorf(KindMalformed, "id must be 1 to %d bytes, got %d", MaxIDLen, len(id))
	}
	bad := func(why string) error { return Errorf(KindMalformed, "id %q %s", id, why) }
	if !utf8.ValidString(id) {
		return bad("is not valid UTF-8")
	}
	for i, r := range id {
		switch {
		case unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r):
			return Errorf(KindMalformed, "id %q has a control, format or space character at byte %d", id, i)
		case r < utf8.RuneSelf && strings.ContainsRune(idForbidden, r):
			return Errorf(KindMalformed, "id %q has %q at byte %d: ids may not hold / \\ * ? [ ] or ,", id, r, i)
		}
	}
	switch {
	case id[0] == '.':
		return bad("starts with '.'")
	case id[0] == '-':
		return bad("starts with '-'")
	case strings.Contains(id, ".."):
		return bad("holds \"..\"")
	case engineWord(id):
		return bad("starts like a compound matcher term (X@)")
	}
	for _, w := range idWords {
		if id == w {
			return bad("is an operator of compound targets")
		}
	}
	return nil
}

// MaxHelloFrame is the largest Hello frame a master or relay reads. A
// Hello comes before the sender's key is checked, and its CBOR decodes to
// up to some 70 times its size (empty maps), so it is read with this limit
// rather than the connection's frame limit (max_frame), before anything is
// allocated for it. Grains that do not fit follow in a Grains message once
// the key is accepted (EncodeHello).
const MaxHelloFrame = 64 << 10

// EncodeHello encodes h as it is sent: the Hello's frame body, and, when h
// with its grains would not fit MaxHelloFrame, a Grains message's frame
// body to send once the master has accepted the key (the Hello then goes
// without its grains). late is nil when the grains fit in the Hello.
func EncodeHello(h *Hello) (hello, late []byte, err error) {
	hello, err = Encode(h)
	if err != nil || len(hello) <= MaxHelloFrame || h.Grains == nil {
		return hello, nil, err
	}
	bare := *h
	bare.Grains = nil
	if hello, err = Encode(&bare); err != nil {
		return nil, nil, err
	}
	if late, err = Encode(&Grains{Grains: h.Grains}); err != nil {
		return nil, nil, err
	}
	return hello, late, nil
}

// engineWord reports whether w starts as an engine-prefixed word of Salt's
// compound matcher (salt/utils/minions.py TARGET_REX): one of G P I J L N S
// E R then '@', or one of G P I J, any one character (the delimiter) and '@'.
func engineWord(w string) bool {
	if len(w) < 2 || !strings.ContainsRune("GPIJLNSER", rune(w[0])) {
		return false
	}
	if w[1] == '@' {
		return true
	}
	if !strings.ContainsRune("GPIJ", rune(w[0])) {
		return false
	}
	_, sz := utf8.DecodeRuneInString(w[1:])
	return 1+sz < len(w) && w[1+sz] == '@'
}

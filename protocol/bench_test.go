package protocol

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
)

// benchReturnBody is a cmd.run return with 1 KiB of stdout.
func benchReturnBody() *ReturnBody {
	b := testReturnBody()
	b.Return = strings.Repeat("drwxr-xr-x 2 root root 4096 Nov 22 12:00 bin\n", 24)[:1024]
	return b
}

func BenchmarkCodec(b *testing.B) {
	type codec struct {
		name      string
		marshal   func(any) ([]byte, error)
		unmarshal func([]byte, any) error
	}
	codecs := []codec{
		{"cbor", Marshal, Unmarshal},
		{"json", json.Marshal, json.Unmarshal},
	}
	msgs := []struct {
		name  string
		value any
		fresh func() any
	}{
		{"job", testJobBody(), func() any { return new(JobBody) }},
		{"return", benchReturnBody(), func() any { return new(ReturnBody) }},
	}
	for _, m := range msgs {
		for _, c := range codecs {
			enc, err := c.marshal(m.value)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("op=encode/msg="+m.name+"/codec="+c.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					if _, err := c.marshal(m.value); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("op=decode/msg="+m.name+"/codec="+c.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(enc)))
				for b.Loop() {
					if err := c.unmarshal(enc, m.fresh()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// signedReturn returns the bytes a return's signature covers.
func signedReturn(b *testing.B) []byte {
	b.Helper()
	body, err := Marshal(benchReturnBody())
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(domainReturn), body...)
}

func BenchmarkSign(b *testing.B) {
	msg := signedReturn(b)
	_, priv := newKey(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		ed25519.Sign(priv, msg)
	}
}

func BenchmarkVerify(b *testing.B) {
	msg := signedReturn(b)
	pub, priv := newKey(b)
	sig := ed25519.Sign(priv, msg)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("signature does not verify")
		}
	}
}

// BenchmarkOpenReturn is what a master spends on each return: verify and
// decode.
func BenchmarkOpenReturn(b *testing.B) {
	pub, priv := newKey(b)
	r, err := SignReturn(priv, benchReturnBody())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(r.Body)))
	for b.Loop() {
		if _, err := r.Open(pub, "web01"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHMAC is the alternative to a per-return signature: an HMAC-SHA256
// tag with a per-device key, over the same bytes. key=new makes the HMAC
// for every message; key=reused keeps one per device and resets it.
func BenchmarkHMAC(b *testing.B) {
	msg := signedReturn(b)
	key := make([]byte, 32)
	b.Run("key=new", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			h := hmac.New(sha256.New, key)
			h.Write(msg)
			h.Sum(nil)
		}
	})
	b.Run("key=reused", func(b *testing.B) {
		h := hmac.New(sha256.New, key)
		var sum [sha256.Size]byte
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			h.Reset()
			h.Write(msg)
			h.Sum(sum[:0])
		}
	})
}

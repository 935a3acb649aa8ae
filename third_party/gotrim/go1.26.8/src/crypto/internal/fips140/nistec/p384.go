// Copyright 2022 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Halite device build (third_party/gotrim/HALITE.md): this file replaces
// Go's generated p384.go in the 32-bit ARM and MIPS agent. P384 is not in
// that build: every operation that can fail returns errP384, the others
// leave their receiver unchanged, and no point but the one at infinity
// exists, so the fiat field arithmetic of this curve is not linked.

package nistec

import "errors"

// errP384 is the error of every P384 operation in the Halite device build.
var errP384 = errors.New("P-384 is not in the Halite device build (third_party/gotrim)")

// P384Point is a P384 point. In the Halite device build it is always the
// point at infinity.
type P384Point struct {
	_ byte
}

// NewP384Point returns a new P384Point representing the point at infinity point.
func NewP384Point() *P384Point {
	return &P384Point{}
}

// SetGenerator leaves p the point at infinity and returns p: the device
// build has no P384 generator.
func (p *P384Point) SetGenerator() *P384Point { return p }

// Set sets p = q and returns p.
func (p *P384Point) Set(q *P384Point) *P384Point { return p }

// SetBytes returns nil and errP384: no encoding is accepted.
func (p *P384Point) SetBytes(b []byte) (*P384Point, error) { return nil, errP384 }

// Bytes returns the encoding of the point at infinity.
func (p *P384Point) Bytes() []byte { return []byte{0} }

// BytesX returns errP384.
func (p *P384Point) BytesX() ([]byte, error) { return nil, errP384 }

// BytesCompressed returns the encoding of the point at infinity.
func (p *P384Point) BytesCompressed() []byte { return []byte{0} }

// Add leaves q the point at infinity and returns it.
func (q *P384Point) Add(p1, p2 *P384Point) *P384Point { return q }

// Double leaves q the point at infinity and returns it.
func (q *P384Point) Double(p *P384Point) *P384Point { return q }

// Select leaves q the point at infinity and returns it.
func (q *P384Point) Select(p1, p2 *P384Point, cond int) *P384Point { return q }

// ScalarMult returns nil and errP384.
func (p *P384Point) ScalarMult(q *P384Point, scalar []byte) (*P384Point, error) {
	return nil, errP384
}

// ScalarBaseMult returns nil and errP384.
func (p *P384Point) ScalarBaseMult(scalar []byte) (*P384Point, error) {
	return nil, errP384
}

// Copyright 2022 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Halite device build (third_party/gotrim/HALITE.md): this file replaces
// Go's generated p521.go in the 32-bit ARM and MIPS agent. P521 is not in
// that build: every operation that can fail returns errP521, the others
// leave their receiver unchanged, and no point but the one at infinity
// exists, so the fiat field arithmetic of this curve is not linked.

package nistec

import "errors"

// errP521 is the error of every P521 operation in the Halite device build.
var errP521 = errors.New("P-521 is not in the Halite device build (third_party/gotrim)")

// P521Point is a P521 point. In the Halite device build it is always the
// point at infinity.
type P521Point struct {
	_ byte
}

// NewP521Point returns a new P521Point representing the point at infinity point.
func NewP521Point() *P521Point {
	return &P521Point{}
}

// SetGenerator leaves p the point at infinity and returns p: the device
// build has no P521 generator.
func (p *P521Point) SetGenerator() *P521Point { return p }

// Set sets p = q and returns p.
func (p *P521Point) Set(q *P521Point) *P521Point { return p }

// SetBytes returns nil and errP521: no encoding is accepted.
func (p *P521Point) SetBytes(b []byte) (*P521Point, error) { return nil, errP521 }

// Bytes returns the encoding of the point at infinity.
func (p *P521Point) Bytes() []byte { return []byte{0} }

// BytesX returns errP521.
func (p *P521Point) BytesX() ([]byte, error) { return nil, errP521 }

// BytesCompressed returns the encoding of the point at infinity.
func (p *P521Point) BytesCompressed() []byte { return []byte{0} }

// Add leaves q the point at infinity and returns it.
func (q *P521Point) Add(p1, p2 *P521Point) *P521Point { return q }

// Double leaves q the point at infinity and returns it.
func (q *P521Point) Double(p *P521Point) *P521Point { return q }

// Select leaves q the point at infinity and returns it.
func (q *P521Point) Select(p1, p2 *P521Point, cond int) *P521Point { return q }

// ScalarMult returns nil and errP521.
func (p *P521Point) ScalarMult(q *P521Point, scalar []byte) (*P521Point, error) {
	return nil, errP521
}

// ScalarBaseMult returns nil and errP521.
func (p *P521Point) ScalarBaseMult(scalar []byte) (*P521Point, error) {
	return nil, errP521
}

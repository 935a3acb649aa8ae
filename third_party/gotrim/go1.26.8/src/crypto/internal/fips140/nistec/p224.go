// Copyright 2022 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Halite device build (third_party/gotrim/HALITE.md): this file replaces
// Go's generated p224.go in the 32-bit ARM and MIPS agent. P224 is not in
// that build: every operation that can fail returns errP224, the others
// leave their receiver unchanged, and no point but the one at infinity
// exists, so the fiat field arithmetic of this curve is not linked.

package nistec

import "errors"

// errP224 is the error of every P224 operation in the Halite device build.
var errP224 = errors.New("P-224 is not in the Halite device build (third_party/gotrim)")

// P224Point is a P224 point. In the Halite device build it is always the
// point at infinity.
type P224Point struct {
	_ byte
}

// NewP224Point returns a new P224Point representing the point at infinity point.
func NewP224Point() *P224Point {
	return &P224Point{}
}

// SetGenerator leaves p the point at infinity and returns p: the device
// build has no P224 generator.
func (p *P224Point) SetGenerator() *P224Point { return p }

// Set sets p = q and returns p.
func (p *P224Point) Set(q *P224Point) *P224Point { return p }

// SetBytes returns nil and errP224: no encoding is accepted.
func (p *P224Point) SetBytes(b []byte) (*P224Point, error) { return nil, errP224 }

// Bytes returns the encoding of the point at infinity.
func (p *P224Point) Bytes() []byte { return []byte{0} }

// BytesX returns errP224.
func (p *P224Point) BytesX() ([]byte, error) { return nil, errP224 }

// BytesCompressed returns the encoding of the point at infinity.
func (p *P224Point) BytesCompressed() []byte { return []byte{0} }

// Add leaves q the point at infinity and returns it.
func (q *P224Point) Add(p1, p2 *P224Point) *P224Point { return q }

// Double leaves q the point at infinity and returns it.
func (q *P224Point) Double(p *P224Point) *P224Point { return q }

// Select leaves q the point at infinity and returns it.
func (q *P224Point) Select(p1, p2 *P224Point, cond int) *P224Point { return q }

// ScalarMult returns nil and errP224.
func (p *P224Point) ScalarMult(q *P224Point, scalar []byte) (*P224Point, error) {
	return nil, errP224
}

// ScalarBaseMult returns nil and errP224.
func (p *P224Point) ScalarBaseMult(scalar []byte) (*P224Point, error) {
	return nil, errP224
}

// Copyright 2024 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Halite device build (third_party/gotrim/HALITE.md): this file replaces
// Go's rsa.go, and cast.go, keygen.go, pkcs1v15.go and pkcs1v22.go are left
// out, in the 32-bit ARM and MIPS agent. RSA is not in that build: every
// operation returns errRSA, no private key can be made, and so the RSA
// self-test (CAST), which only RSA operations ran, is gone with it. The
// types and errors crypto/rsa names are upstream's.

package rsa

import (
	"crypto/internal/fips140/bigmod"
	"errors"
	"hash"
	"io"
)

// errRSA is the error of every RSA operation in the Halite device build.
var errRSA = errors.New("crypto/rsa: RSA is not in the Halite device build (third_party/gotrim)")

type PublicKey struct {
	N *bigmod.Modulus
	E int
}

// Size returns the modulus size in bytes. Raw signatures and ciphertexts
// for or by this public key will have the same size.
func (pub *PublicKey) Size() int {
	return (pub.N.BitLen() + 7) / 8
}

// PrivateKey is an RSA private key. None can be made in the Halite device
// build.
type PrivateKey struct {
	pub PublicKey
}

func (priv *PrivateKey) PublicKey() *PublicKey {
	return &priv.pub
}

// NewPrivateKey returns errRSA.
func NewPrivateKey(N []byte, e int, d, P, Q []byte) (*PrivateKey, error) {
	return nil, errRSA
}

// NewPrivateKeyWithPrecomputation returns errRSA.
func NewPrivateKeyWithPrecomputation(N []byte, e int, d, P, Q, dP, dQ, qInv []byte) (*PrivateKey, error) {
	return nil, errRSA
}

// NewPrivateKeyWithoutCRT returns errRSA.
func NewPrivateKeyWithoutCRT(N []byte, e int, d []byte) (*PrivateKey, error) {
	return nil, errRSA
}

// Export returns nothing: no PrivateKey exists in the Halite device build.
func (priv *PrivateKey) Export() (N []byte, e int, d, P, Q, dP, dQ, qInv []byte) {
	return
}

// GenerateKey returns errRSA.
func GenerateKey(rand io.Reader, bits int) (*PrivateKey, error) {
	return nil, errRSA
}

// Encrypt returns errRSA.
func Encrypt(pub *PublicKey, plaintext []byte) ([]byte, error) {
	return nil, errRSA
}

var ErrMessageTooLong = errors.New("crypto/rsa: message too long for RSA key size")
var ErrDecryption = errors.New("crypto/rsa: decryption error")
var ErrVerification = errors.New("crypto/rsa: verification error")

// DecryptWithoutCheck returns errRSA.
func DecryptWithoutCheck(priv *PrivateKey, ciphertext []byte) ([]byte, error) {
	return nil, errRSA
}

// DecryptWithCheck returns errRSA.
func DecryptWithCheck(priv *PrivateKey, ciphertext []byte) ([]byte, error) {
	return nil, errRSA
}

// SignPKCS1v15 returns errRSA.
func SignPKCS1v15(priv *PrivateKey, hash string, hashed []byte) ([]byte, error) {
	return nil, errRSA
}

// VerifyPKCS1v15 returns errRSA.
func VerifyPKCS1v15(pub *PublicKey, hash string, hashed []byte, sig []byte) error {
	return errRSA
}

// PSSMaxSaltLength returns errRSA.
func PSSMaxSaltLength(pub *PublicKey, hash hash.Hash) (int, error) {
	return 0, errRSA
}

// SignPSS returns errRSA.
func SignPSS(rand io.Reader, priv *PrivateKey, hash hash.Hash, hashed []byte, saltLength int) ([]byte, error) {
	return nil, errRSA
}

// VerifyPSS returns errRSA.
func VerifyPSS(pub *PublicKey, hash hash.Hash, digest []byte, sig []byte) error {
	return errRSA
}

// VerifyPSSWithSaltLength returns errRSA.
func VerifyPSSWithSaltLength(pub *PublicKey, hash hash.Hash, digest []byte, sig []byte, saltLength int) error {
	return errRSA
}

// EncryptOAEP returns errRSA.
func EncryptOAEP(hash, mgfHash hash.Hash, random io.Reader, pub *PublicKey, msg []byte, label []byte) ([]byte, error) {
	return nil, errRSA
}

// DecryptOAEP returns errRSA.
func DecryptOAEP(hash, mgfHash hash.Hash, priv *PrivateKey, ciphertext []byte, label []byte) ([]byte, error) {
	return nil, errRSA
}

package master

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// firmwareManifest indexes the build at path for the chunk transport and
// returns its manifest as a job carries it ({"size", "sha256", "chunks"}).
func (m *Master) firmwareManifest(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const chunk = 256 << 10
	whole := sha256.New()
	var chunks []any
	var size int64
	buf := make([]byte, chunk)
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			whole.Write(buf[:n])
			s := sha256.Sum256(buf[:n])
			chunks = append(chunks, hex.EncodeToString(s[:]))
			size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return map[string]any{"size": size, "sha256": hex.EncodeToString(whole.Sum(nil)), "chunks": chunks}, nil
}

// Command gotrim writes the `go build -overlay` file that builds the agent
// for 32-bit ARM and MIPS with the trimmed standard library of
// third_party/gotrim (see its HALITE.md), for the Go toolchain that builds
// in the module. It exits non-zero, saying why, when that toolchain is not
// the one the trims were made for or one of the originals they replace
// differs. The Makefile's cross target runs it:
//
//	go run ./tools/gotrim -go go -o dist/gotrim-overlay.json
//	go build -overlay dist/gotrim-overlay.json ... ./cmd/halite-agent
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/halite-fleet/halite/internal/gotrim"
)

func main() {
	out := flag.String("o", "gotrim-overlay.json", "overlay file to write")
	dir := flag.String("C", ".", "the Halite module's root")
	goCmd := flag.String("go", "go", "the go command that will build the agent")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: gotrim [-C module-dir] [-go go-command] [-o overlay.json]")
		os.Exit(2)
	}
	if err := gotrim.WriteForModule(context.Background(), *goCmd, *dir, nil, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gotrim: REFUSED:", err)
		os.Exit(1)
	}
}

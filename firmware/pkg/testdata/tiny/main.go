// Command tiny is a real, small ELF executable for each architecture the
// package tests put in packages in place of the Halite programs.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() { fmt.Println(filepath.Base(os.Args[0])) }

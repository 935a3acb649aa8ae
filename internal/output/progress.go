package output

import (
	"fmt"
	"io"
)

// Progress redraws, on the current terminal line, how many of the targeted
// agents have returned: "\r[done/total] returned". The caller shows it only
// when w is a terminal, and calls ClearProgress before printing results.
// Write errors are ignored: progress is a courtesy, and the results that
// follow report a broken terminal.
func Progress(w io.Writer, done, total int) {
	fmt.Fprintf(w, "\r[%d/%d] returned", done, total)
}

// ClearProgress erases the line Progress drew and leaves the cursor at its
// start.
func ClearProgress(w io.Writer) {
	io.WriteString(w, "\r\x1b[K")
}

//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device (a terminal, or
// /dev/null: then reading the answer gets end of file, which is a no).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

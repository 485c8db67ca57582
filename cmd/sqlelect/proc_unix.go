//go:build unix

package main

import "syscall"

// signalGroup sends sig to every process of process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error { return syscall.Kill(-pgid, sig) }

//go:build unix && !linux

package main

import "syscall"

// childAttr puts CMD in a process group of its own, so that it and its
// children can be signalled together.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// groupAlive reports whether process group pgid still has members (zombies
// not yet reaped count).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

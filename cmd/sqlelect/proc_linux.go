//go:build linux

package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// childAttr puts CMD in a process group of its own, so that it and its
// children can be signalled together, and has the kernel kill it should
// sqlelect die without stopping it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether process group pgid has a member that is not a
// zombie. Zombies count for kill(-pgid, 0), and the orphans of CMD (its
// children, once it exited) are reaped by init, which may take its time.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			return true
		}
	}
	return false
}

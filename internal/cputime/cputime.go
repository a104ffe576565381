// Package cputime reads the processor time this process has used, for
// benchmarks that report CPU per unit of work beside their rates; it is
// its own package so that pure packages' benchmarks need not import the
// database's test helpers to read it.
package cputime

import (
	"syscall"
	"time"
)

// Process is this process's user and system time so far, on every core.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

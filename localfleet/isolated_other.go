//go:build !linux

package localfleet

import (
	"errors"
	"fmt"
	"syscall"
)

var errNoNamespaces = errors.New("isolated members need Linux network namespaces")

func namespaceAttr() *syscall.SysProcAttr { return nil }

func loopbackUp() error { return errNoNamespaces }

func nsenterArgs(pid int) []string { return []string{fmt.Sprintf("--net=/proc/%d/ns/net", pid)} }

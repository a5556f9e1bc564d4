package localfleet

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// namespaceAttr makes the helper in a new network namespace: as root, in this user namespace;
// otherwise in a new user namespace too, where this user is root (unprivileged user namespaces).
func namespaceAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if uid := os.Geteuid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

// loopbackUp brings up the loopback interface of this process's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up lo: reading its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	return nil
}

// nsenterArgs are nsenter's arguments that run a program in the network namespace (and, when
// this process is not root, the user namespace) of process pid.
func nsenterArgs(pid int) []string {
	args := []string{fmt.Sprintf("--net=/proc/%d/ns/net", pid)}
	if os.Geteuid() != 0 {
		args = append(args, fmt.Sprintf("--user=/proc/%d/ns/user", pid), "--preserve-credentials")
	}
	return args
}

package localfleet

import (
	"context"
	"os/exec"
)

// Isolated reports whether the server lives in a network namespace of its own
// (Options.Isolated).
func (s *Server) Isolated() bool { return s.isolated != nil }

// Command is exec.CommandContext for a program that runs in the server's network: for an
// isolated server, in its network namespace (through nsenter), where its API server is at its
// URL and nothing else of this machine is reachable but what Bridge lets through; otherwise as
// exec.CommandContext does. Its Kubeconfig works there.
func (s *Server) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if s.isolated == nil {
		return exec.CommandContext(ctx, name, args...)
	}
	enter := append(nsenterArgs(s.isolated.cmd.Process.Pid), "--", name)
	return exec.CommandContext(ctx, "nsenter", append(enter, args...)...)
}

// Bridge lets programs in an isolated server's network reach address, a loopback host:port of
// this machine's network, at the same address: a tunnel server for its agent, or the registry for
// a join run at the edge. It bridges nothing else; an address bridged already stays bridged until
// the server stops. For a server that is not isolated it does nothing: everything is reachable.
func (s *Server) Bridge(address string) error {
	if s.isolated == nil {
		return nil
	}
	return s.isolated.bridge(address)
}

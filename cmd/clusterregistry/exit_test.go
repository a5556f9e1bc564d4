package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exitCase is one command line and the exit status the rule (doc.go, README's "Exit status")
// gives it, with a piece of what it must say.
type exitCase struct {
	args []string
	code int
	says string
}

func runExitCases(t *testing.T, kubeconfig string, cases []exitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"--kubeconfig", kubeconfig}, tc.args...), &stdout, &stderr)
			require.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
			require.Contains(t, stdout.String()+stderr.String(), tc.says)
		})
	}
}

// The exit status follows one rule across the subcommands: 2 for a command line that is wrong
// before anything is read or reached, 1 for what could not be done (a name that does not exist
// included, as kubectl's), 0 for what was done. These need no server.
func TestExitStatus(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: a, user: {token: not-a-real-one}}]
contexts: [{name: a, context: {cluster: a, user: a, namespace: fleet}}]
current-context: a
`), 0o600))
	runExitCases(t, kubeconfig, []exitCase{
		{[]string{"nosuch"}, 2, `unknown command "nosuch"`},
		{[]string{"get", "--nosuch"}, 2, "unknown flag: --nosuch"},
		{[]string{"completion", "fish2"}, 2, `completion "fish2": want one of bash, zsh, fish, powershell`},
		{[]string{"get", "-o", "nosuch"}, 2, "-o nosuch"},
		{[]string{"unjoin"}, 2, "the name of the Cluster to unjoin"},
		{[]string{"join", "a", "--name", "x", "--token-ttl", "1m"}, 2, "--token-ttl 1m0s"},
		{[]string{"rotate", "--renew-at", "2"}, 2, "--renew-at 2"},
		{[]string{"controllers", "--controllers", "releases", "--member-timeout", "0s"}, 2, "--member-timeout 0s"},
		{[]string{"tunnel-server", "-A"}, 2, "--frontend-cert is required"},
		{[]string{"get", "--context", "nosuch"}, 1, `context "nosuch" does not exist`},
		{[]string{"join", "nosuchctx", "--name", "x"}, 1, `context "nosuchctx" is not in the kubeconfig (it has: a)`},
		{[]string{"join", "a", "--name", "BadName"}, 2, `--name "BadName": a lowercase RFC 1123 subdomain`},
		{[]string{"version"}, 0, "clusterregistry"},
		{[]string{"completion", "bash"}, 0, "bash completion"},
	})
}

// The cases that need a registry: what does not exist there is 1, whatever the subcommand; a
// query that finds nothing is 0, as kubectl get's.
func TestExitStatusAgainstARegistry(t *testing.T) {
	lf := sharedFleet(t)
	runExitCases(t, lf.Registry.Kubeconfig, []exitCase{
		{[]string{"-n", lf.Namespace, "unjoin", "nope"}, 1, "cluster " + lf.Namespace + "/nope not found: nothing was unjoined"},
		{[]string{"-n", lf.Namespace, "unjoin", "nope", "--dry-run"}, 1, "not found"},
		{[]string{"-n", "nosuchns", "rotate", "--once"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "nosuchns", "health"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", lf.Namespace, "get", "nope"}, 1, "no Cluster nope in namespace " + lf.Namespace},
		{[]string{"-n", lf.Namespace, "describe", "nope"}, 1, "nope"},
		{[]string{"-n", "nosuchns", "get"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "nosuchns", "get", "placements"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "nosuchns", "get", "releases"}, 1, `cluster set "nosuchns" does not exist`},
		// describe release said the release was not found, get releases that the set does not exist.
		{[]string{"-n", "nosuchns", "describe", "release", "web"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", lf.Namespace, "describe", "release", "nope"}, 1, `releases.clusterregistry.k8s.io "nope" not found`},
		{[]string{"-n", "nosuchns", "describe"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "nosuchns", "export"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "nosuchns", "tunnel-server"}, 1, `cluster set "nosuchns" does not exist`},
		{[]string{"-n", "default", "get"}, 0, "No Clusters found in namespace default."},
		{[]string{"-n", lf.Namespace, "get"}, 0, "member-1"},
	})
}

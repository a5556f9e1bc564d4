package tunnel_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	anpagent "sigs.k8s.io/apiserver-network-proxy/pkg/agent"
)

// The benchmark's agents: konnectivity's agent library, one client set per member, in a child
// process (this test binary, started again with benchAgentsEnv naming a file of what to run), so that the parent's CPU and
// heap hold the tunnel server and the readers only.

const benchAgentsEnv = "TUNNEL_BENCH_AGENTS"

// benchAgents is what the child runs: an agent for each of Agents, dialling the server at
// Address, verified with the CA in CAFile.
type benchAgents struct {
	Address string       `json:"address"`
	CAFile  string       `json:"caFile"`
	Agents  []benchAgent `json:"agents"`
}

type benchAgent struct {
	ID        string `json:"id"`
	TokenFile string `json:"tokenFile"`
}

// startBenchAgents starts the child, until the benchmark ends.
func startBenchAgents(b *testing.B, spec benchAgents) {
	b.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "agents.json") // a thousand agents are too long for an environment variable
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchAgentsEnv+"="+file)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
}

// benchAgentsMain runs the agents when this process is the child; call it first in TestMain.
func benchAgentsMain() (code int, child bool) {
	file := os.Getenv(benchAgentsEnv)
	if file == "" {
		return 0, false
	}
	var spec benchAgents
	raw, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench agents:", err)
		return 2, true
	}
	ca, err := os.ReadFile(spec.CAFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench agents:", err)
		return 2, true
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	creds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	stop := make(chan struct{})
	for _, a := range spec.Agents {
		config := &anpagent.ClientSetConfig{
			Address: spec.Address, AgentID: a.ID, AgentIdentifiers: "host=" + a.ID,
			SyncInterval: 200 * time.Millisecond, ProbeInterval: time.Second, SyncIntervalCap: 5 * time.Second,
			DialOptions: []grpc.DialOption{creds}, ServiceAccountTokenPath: a.TokenFile, XfrChannelSize: 150,
		}
		cs := config.NewAgentClientSet(stop, stop)
		// As konnectivity's agent command sets it: the server count from the servers' answers.
		cs.SetServerCounter(anpagent.NewAggregateServerCounter(nil, anpagent.NewResponseBasedCounter(cs), "default"))
		cs.Serve()
	}
	_, _ = bufio.NewReader(os.Stdin).ReadByte() // until the parent closes its end
	close(stop)
	return 0, true
}

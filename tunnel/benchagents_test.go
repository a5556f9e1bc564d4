package tunnel_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	anpagent "sigs.k8s.io/apiserver-network-proxy/pkg/agent"

	"github.com/cluster-registry/sdk/testkit/replicaproc"
)

// The benchmark's agents: konnectivity's agent library, one client set per member, in a child
// process (package replicaproc), so that the parent's CPU and heap hold the readers only.

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
	replicaproc.Start(b, benchAgentsEnv, spec)
}

// benchAgentsMain runs the agents when this process is the child; call it first in TestMain.
func benchAgentsMain() (code int, child bool) {
	return replicaproc.Main(benchAgentsEnv, runBenchAgents)
}

// runBenchAgents runs the agents until the parent closes in.
func runBenchAgents(spec benchAgents, in io.Reader, _ io.Writer) error {
	ca, err := os.ReadFile(spec.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	creds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	stop := make(chan struct{})
	defer close(stop)
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
	_, err = io.Copy(io.Discard, in)
	return err
}

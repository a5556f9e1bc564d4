package agent_test

import (
	"fmt"
	"strings"

	"github.com/cluster-registry/sdk/tunnel/agent"
)

// The agent's flags claim the one identity the tunnel server admits for it, and read the token
// and CA where its Deployment mounts them.
func ExampleSpec_Args() {
	s := agent.Spec{
		Namespace: "clusterregistry-fleet-edge-3-1a2b3c4d",
		Host:      "edge-3-agent.fleet.agent.clusterregistry.invalid",
		Server:    "tunnel.example.com:8091",
		ServerCA:  []byte("-----BEGIN CERTIFICATE-----\n..."),
	}
	if err := s.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(s.Args(agent.MountPath), "\n"))
	// Output:
	// --proxy-server-host=tunnel.example.com
	// --proxy-server-port=8091
	// --ca-cert=/var/run/clusterregistry-tunnel/ca.crt
	// --service-account-token-path=/var/run/clusterregistry-tunnel/token
	// --agent-id=edge-3-agent.fleet.agent.clusterregistry.invalid
	// --agent-identifiers=host=edge-3-agent.fleet.agent.clusterregistry.invalid
	// --sync-forever
}

// A Spec says which field is missing or malformed.
func ExampleSpec_Validate() {
	s := agent.Spec{Namespace: "ns", Host: "h", Server: "tunnel.example.com", ServerCA: []byte("ca")}
	fmt.Println(s.Validate())
	// Output:
	// agent.Spec.Server: "tunnel.example.com" is not host:port, the tunnel server's agent address
}

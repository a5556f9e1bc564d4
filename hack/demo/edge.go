package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/testcerts"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// edgeMember is the member the demo runs in a network of its own, as an edge cluster behind NAT
// is: nothing here can dial it, and it is joined and reached through the tunnel.
const edgeMember = "member-3"

// edge is the tunnel to the edge member: the tunnel server beside the registry, the member's
// agent, and the flags with which readers dial through the server.
type edge struct {
	dir   string
	trust []string
	// procs are the processes to stop, the agent first once it runs.
	procs []*exec.Cmd
	agent bool
}

// stop stops the agent and the tunnel server and removes their files.
func (e *edge) stop() {
	for i, p := range e.procs {
		if i == 0 && e.agent {
			_ = p.Process.Kill() // konnectivity's agent drains for good on a signal; it keeps no state
		} else {
			_ = p.Process.Signal(os.Interrupt)
		}
		_ = p.Wait()
	}
	_ = os.RemoveAll(e.dir)
}

// joinEdge shows that the edge member cannot be dialled, runs a tunnel server, joins the member
// from inside its network (with the agent's manifests written out), and runs the agent they
// describe there. The readers' tunnel flags are in d.trust from then on.
func (d *demo) joinEdge() (*edge, error) {
	m := d.lf.Member(edgeMember)
	step(edgeMember + " lives in a network namespace of its own, as an edge cluster behind NAT: it can dial out\n" +
		"   (through one bridge, to the tunnel server and the registry), and nothing here can dial in")
	address := strings.TrimPrefix(m.URL(), "https://")
	fmt.Printf("$ dial %s   # %s's API server, from the registry's network\n", address, edgeMember)
	if c, err := net.DialTimeout("tcp", address, 3*time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s's API server answered a dial from outside its network", edgeMember)
	} else {
		fmt.Println(err)
	}
	// localfleet registered it as any member, dialled directly; it is joined again below.
	if err := d.kubectl("delete", "cluster/"+edgeMember, "secret/"+edgeMember+"-token", "-n", d.lf.Namespace); err != nil {
		return nil, err
	}
	e := &edge{}
	var err error
	if e.dir, err = os.MkdirTemp("", "demo-edge-"); err != nil {
		return nil, err
	}
	agentsAddr, err := e.startServer(d)
	if err != nil {
		e.stop()
		return nil, err
	}
	if err := d.joinAtTheEdge(m, e, agentsAddr); err != nil {
		e.stop()
		return nil, err
	}
	d.trust = e.trust
	return e, nil
}

// startServer writes the tunnel's certificates and starts clusterregistry tunnel-server; it
// returns the address agents dial.
func (e *edge) startServer(d *demo) (string, error) {
	readers, agents := testcerts.NewCA("demo-tunnel-readers"), testcerts.NewCA("demo-tunnel-agents")
	frontendCert, frontendKey := testcerts.PEM(readers.Serving("127.0.0.1"))
	readerCert, readerKey := testcerts.PEM(readers.Client("demo-reader", "system:masters"))
	agentCert, agentKey := testcerts.PEM(agents.Serving("127.0.0.1"))
	files := map[string][]byte{"frontend.crt": frontendCert, "frontend.key": frontendKey, "readers-ca.crt": readers.PEM,
		"reader.crt": readerCert, "reader.key": readerKey, "agents.crt": agentCert, "agents.key": agentKey, "agents-ca.crt": agents.PEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	frontend, agentsAddr := freeAddress(), freeAddress()
	if frontend == "" || agentsAddr == "" {
		return "", errors.New("no free port for the tunnel server")
	}
	file := func(name string) string { return filepath.Join(e.dir, name) }
	step("The tunnel server, beside the registry: agents dial in on one address, readers on another,\n" +
		"   each reader with a client certificate, and TLS to the member's API server runs end to end through it")
	cmd := exec.CommandContext(d.ctx, d.clusterregistry, "tunnel-server", "-A", "--frontend-address="+frontend, "--agent-address="+agentsAddr,
		"--frontend-cert="+file("frontend.crt"), "--frontend-key="+file("frontend.key"), "--reader-ca="+file("readers-ca.crt"),
		"--agent-cert="+file("agents.crt"), "--agent-key="+file("agents.key"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.lf.Registry.Kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	fmt.Printf("$ clusterregistry %s &\n", strings.Join(cmd.Args[1:], " "))
	if err := cmd.Start(); err != nil {
		return "", err
	}
	e.procs = append(e.procs, cmd)
	e.trust = []string{"--tunnel-server=" + frontend, "--tunnel-ca=" + file("readers-ca.crt"),
		"--tunnel-cert=" + file("reader.crt"), "--tunnel-key=" + file("reader.key")}
	return agentsAddr, nil
}

// joinAtTheEdge runs clusterregistry join --tunnel in the edge member's network, as an operator
// there does, and then the agent its manifests describe.
func (d *demo) joinAtTheEdge(m *localfleet.Member, e *edge, agentsAddr string) error {
	for _, addr := range []string{agentsAddr, strings.TrimPrefix(d.lf.Registry.URL(), "https://")} {
		if err := m.Bridge(addr); err != nil {
			return err
		}
	}
	kubeconfig, err := contextsFile(e.dir, map[string]string{"registry": d.lf.Registry.Kubeconfig, edgeMember: m.Kubeconfig})
	if err != nil {
		return err
	}
	if err := d.applyOn(m, fleetMemberRoleYAML); err != nil {
		return err
	}
	manifests := filepath.Join(e.dir, "agent.yaml")
	step("Joining " + edgeMember + " from inside its network: its account, the agent's own token for the tunnel server,\n" +
		"   the agent's manifests (written out here; without --tunnel-manifests, applied), and its Cluster")
	args := []string{"--kubeconfig=" + kubeconfig, "--context=registry", "-n", d.lf.Namespace, "join", edgeMember,
		"--labels=env=demo", "--display-name=Edge member 3", "--allow-namespace-creation", "--cluster-role=fleet-member", "--tunnel=" + agentsAddr, "--tunnel-agent-ca=" + filepath.Join(e.dir, "agents-ca.crt"),
		"--tunnel-destination=" + strings.TrimPrefix(m.URL(), "https://"), "--tunnel-manifests=" + manifests}
	fmt.Printf("\n$ clusterregistry %s   # in %s's network\n", strings.Join(args, " "), edgeMember)
	join := m.Command(d.ctx, d.clusterregistry, args...)
	join.Stdout, join.Stderr = os.Stdout, os.Stdout
	if err := join.Run(); err != nil {
		return fmt.Errorf("joining %s: %w", edgeMember, err)
	}
	return e.startAgent(d, m, manifests)
}

// startAgent runs konnectivity's agent as the manifests' Deployment says, with its Secret's files
// where the Deployment mounts them: the member's simulated Nodes run no containers, so the demo
// runs the same agent, with the same arguments, as a process in the member's network.
func (e *edge) startAgent(d *demo, m *localfleet.Member, manifests string) error {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	var deployment appsv1.Deployment
	secret := struct {
		Data map[string][]byte `json:"data"`
	}{}
	for _, doc := range strings.Split(string(data), "---\n") {
		switch {
		case strings.Contains(doc, "kind: Deployment"):
			err = yaml.Unmarshal([]byte(doc), &deployment)
		case strings.Contains(doc, "kind: Secret"):
			err = yaml.Unmarshal([]byte(doc), &secret)
		}
		if err != nil {
			return fmt.Errorf("reading the agent's manifests: %w", err)
		}
	}
	if len(deployment.Spec.Template.Spec.Containers) == 0 {
		return errors.New("the agent's manifests hold no Deployment")
	}
	mounted := filepath.Join(e.dir, "agent")
	if err := os.Mkdir(mounted, 0o700); err != nil {
		return err
	}
	for key, value := range secret.Data {
		if err := os.WriteFile(filepath.Join(mounted, key), value, 0o600); err != nil {
			return err
		}
	}
	var args []string
	for _, a := range deployment.Spec.Template.Spec.Containers[0].Args {
		args = append(args, strings.ReplaceAll(a, agent.MountPath, mounted))
	}
	step("The agent, in " + edgeMember + "'s network, dials out to the tunnel server")
	fmt.Printf("$ konnectivity-agent %s   # the Deployment's container, as a process\n", strings.Join(args, " "))
	cmd := m.Command(d.ctx, filepath.Join(filepath.Dir(d.lf.Kubectl), "konnectivity-agent"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the tunnel agent (hack/build-testbins.sh builds it): %w", err)
	}
	e.procs, e.agent = append([]*exec.Cmd{cmd}, e.procs...), true
	return nil
}

// contextsFile writes a kubeconfig in dir with a context of each kubeconfig file, by the names
// given.
func contextsFile(dir string, files map[string]string) (string, error) {
	merged := clientcmdapi.NewConfig()
	for name, path := range files {
		if err := addContext(merged, name, path); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*merged, path)
}

// addContext adds the current context of the kubeconfig file at path to merged, named name.
func addContext(merged *clientcmdapi.Config, name, path string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	c := cfg.Contexts[cfg.CurrentContext]
	merged.Clusters[name], merged.AuthInfos[name] = cfg.Clusters[c.Cluster], cfg.AuthInfos[c.AuthInfo]
	merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	return nil
}

// freeAddress is a loopback address no one listens on now, or "".
func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// fleetMemberRoleYAML is the edge member's role for the registry's tools: edit, as join's default
// is, and what the capacity controller reads (Nodes, Pods, the About API's ClusterProperties),
// aggregated by the member's own controller.
const fleetMemberRoleYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: fleet-member}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
  - matchLabels: {example.com/aggregate-to-fleet-member: "true"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: fleet-member-capacity
  labels: {example.com/aggregate-to-fleet-member: "true"}
rules:
- {apiGroups: [""], resources: [nodes, pods], verbs: [get, list, watch]}
- {apiGroups: [about.k8s.io], resources: [clusterproperties], verbs: [get, list, watch]}
`

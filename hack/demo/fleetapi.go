package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// fleetAPI is a running cmd/fleet-api, and the token the demo calls it with.
type fleetAPI struct {
	cmd   *exec.Cmd
	url   string
	token string
	// editor is a token of the set's editor, once releaseChart has made one.
	editor string
}

// viewerAccount is the demo's caller of fleet-api, a service account of the fleet's cluster set.
const viewerAccount = "fleet-viewer"

// viewerToken makes a service account fleet-viewer in the fleet's cluster set that may read its
// Clusters and nothing else, and returns a token of it: fleet-api acts for its callers, and this
// is the demo's caller (kubectl create token fleet-viewer -n NS gives one too).
func viewerToken(ctx context.Context, lf *localfleet.Fleet) (string, error) {
	kube, err := kubernetes.NewForConfig(lf.Registry.Config)
	if err != nil {
		return "", err
	}
	ns, name := lf.Namespace, viewerAccount
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"},
	}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	fmt.Printf("$ TOKEN=$(kubectl create token %s -n %s)   # a service account that may get and list Clusters in %s\n", name, ns, ns)
	return tr.Status.Token, nil
}

// startFleetAPI runs fleet-api against the fleet's registry on a free local port, with the
// readers' tunnel flags trust, and returns once it serves.
func startFleetAPI(ctx context.Context, path string, lf *localfleet.Fleet, trust []string) (*fleetAPI, error) {
	cmd := exec.CommandContext(ctx, path, append([]string{"-n", lf.Namespace, "--listen", "127.0.0.1:0"}, trust...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+lf.Registry.Kubeconfig)
	// client-go logs every failed watch of a stopped member; the API itself says so, and since when.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	fmt.Printf("$ fleet-api %s &\n", strings.Join(cmd.Args[1:], " "))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	token, err := viewerToken(ctx, lf)
	if err != nil {
		return nil, err
	}
	api := &fleetAPI{cmd: cmd, token: token}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		fmt.Println(lines.Text())
		if _, addr, ok := strings.Cut(lines.Text(), " on "); ok && strings.HasPrefix(lines.Text(), "serving ") {
			api.url = addr
			break
		}
	}
	if api.url == "" {
		api.stop()
		return nil, fmt.Errorf("fleet-api did not start serving: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(os.Stdout, out) }()
	return api, nil
}

func (a *fleetAPI) stop() {
	_ = a.cmd.Process.Signal(os.Interrupt)
	_ = a.cmd.Wait()
}

// clusterList is what the demo reads of GET /clusters.
type clusterList struct {
	Clusters []struct {
		Name  string `json:"name"`
		Ready string `json:"ready"`
		Nodes struct {
			Total   *int   `json:"total"`
			Unknown string `json:"unknown"`
		} `json:"nodes"`
		Workloads struct {
			Deployments *int   `json:"deployments"`
			Unknown     string `json:"unknown"`
		} `json:"workloads"`
		Cache struct {
			State string    `json:"state"`
			Since time.Time `json:"since"`
			Error string    `json:"error"`
		} `json:"cache"`
	} `json:"clusters"`
}

// decodeClusters reads one answer of GET /clusters into a list of its own: decoded into the last
// poll's list, a field the new answer leaves out (an error, gone once the member is back) kept
// its old value, and the demo showed a Synced member beside a stale "connection refused".
func decodeClusters(body []byte) (clusterList, error) {
	var list clusterList
	err := json.Unmarshal(body, &list)
	return list, err
}

// show waits until member's caches (every member's, if "") are in state, then prints what GET
// /clusters answers: its JSON (cut to a line), and the demo's table of it.
func (a *fleetAPI) show(ctx context.Context, member, state string) error {
	var list clusterList
	var body []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if list, err = decodeClusters(body); err != nil {
			return err
		}
		done := len(list.Clusters) > 0
		for _, c := range list.Clusters {
			if (member == "" || c.Name == member) && c.Cache.State != state {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet-api did not show %s as %s within a minute", member, state)
		}
	}
	fmt.Printf("\n$ curl -H \"Authorization: Bearer $TOKEN\" %s/clusters\n", a.url)
	fmt.Println(cut(strings.TrimSpace(string(body)), 160))
	fmt.Println("\nThe same answer, as the demo tabulates it (a count the caches could not get is ?, never 0):")
	count := func(n *int) string {
		if n == nil {
			return "?"
		}
		return strconv.Itoa(*n)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tREADY\tNODES\tDEPLOYMENTS\tCACHE")
	for _, c := range list.Clusters {
		cache := fmt.Sprintf("%s since %s", c.Cache.State, c.Cache.Since.Local().Format(time.TimeOnly))
		if c.Cache.Error != "" {
			cache += " (" + c.Cache.Error + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Ready, count(c.Nodes.Total), count(c.Workloads.Deployments), cache)
	}
	return w.Flush()
}

// stream shows the first events of GET /watch/clusters (one per member, ADDED), as a client of
// the stream sees them, and where the dashboard is.
func (a *fleetAPI) stream(ctx context.Context, members int) error {
	fmt.Printf("\n$ curl -N -H \"Authorization: Bearer $TOKEN\" %s/watch/clusters\n", a.url)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/watch/clusters", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for i := 0; i < members && lines.Scan(); i++ {
		line := lines.Text()
		line = cut(line, 160)
		fmt.Println(line)
	}
	fmt.Println("(then a line for each change, as it happens)")
	fmt.Printf("\nThe dashboard, live from that stream: open %s/ and paste the token.\n", a.url)
	fmt.Println("docs/images/fleet-api.png is a screenshot of it: hack/demo.sh -screenshot docs/images/fleet-api.png saves one.")
	return lines.Err()
}

// cut shortens a line of JSON to n bytes, saying so.
func cut(line string, n int) string {
	if len(line) > n {
		return line[:n] + "..."
	}
	return line
}

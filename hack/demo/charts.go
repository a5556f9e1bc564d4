package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/localfleet"
)

// demoChart is the demo's chart: a ConfigMap that says which member it is on and its greeting.
var demoChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: greeter\nversion: 1.0.0\n",
	"values.yaml": "greeting: hello\ncluster: unknown\n",
	"templates/greeting.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-greeting}
data:
  greeting: {{ .Values.greeting | quote }}
  cluster: {{ .Values.cluster | quote }}
`,
}

// editorAccount is the demo's caller that releases charts through fleet-api: the set's edit role.
const editorAccount = "fleet-editor"

// releaseChart puts the demo's packaged chart in a ConfigMap of the set, then releases it on the
// placement's members through fleet-api's POST /charts, as an editor of the set (the registry's
// clusterregistry-edit role), each member given its own name as a value; it waits until every
// member runs it, and prints what GET /charts says.
func (a *fleetAPI) releaseChart(ctx context.Context, lf *localfleet.Fleet) error {
	kube, err := kubernetes.NewForConfig(lf.Registry.Config)
	if err != nil {
		return err
	}
	archive, err := chartrender.Package("greeter", demoChart)
	if err != nil {
		return err
	}
	fmt.Printf("$ kubectl create configmap greeter-chart -n %s --from-file=chart.tgz=greeter-1.0.0.tgz\n", lf.Namespace)
	if _, err := kube.CoreV1().ConfigMaps(lf.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeter-chart"},
		BinaryData: map[string][]byte{"chart.tgz": archive}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ns := lf.Namespace
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: editorAccount}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: editorAccount},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "clusterregistry-edit"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: editorAccount, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, editorAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	body := map[string]any{"namespace": ns, "name": "greeter", "placement": "hello",
		"chart":        map[string]any{"configMap": "greeter-chart"},
		"values":       map[string]any{"greeting": "hello from the fleet"},
		"memberValues": []any{map[string]any{"path": "cluster", "from": "Name"}}}
	raw, _ := json.Marshal(body)
	fmt.Printf("$ EDITOR=$(kubectl create token %s -n %s)   # bound to clusterregistry-edit in %s\n", editorAccount, ns, ns)
	fmt.Printf("$ curl -H \"Authorization: Bearer $EDITOR\" -H 'Content-Type: application/json' %s/charts -d '%s'\n", a.url, raw)
	a.editor = tr.Status.Token
	if err := a.call(ctx, tr.Status.Token, http.MethodPost, "/charts", raw, http.StatusCreated, nil); err != nil {
		return err
	}
	fmt.Println("(201 Created: a Release, created in the registry as the editor)")
	var list struct {
		Charts []struct {
			Name      string `json:"name"`
			Members   int    `json:"members"`
			Ready     int    `json:"ready"`
			Delivered *struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"delivered"`
			PerMember []struct {
				Cluster  string `json:"cluster"`
				Phase    string `json:"phase"`
				Revision string `json:"revision"`
			} `json:"perMember"`
		} `json:"charts"`
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := a.call(ctx, tr.Status.Token, http.MethodGet, "/charts", nil, http.StatusOK, &list); err != nil {
			return err
		}
		if len(list.Charts) == 1 && list.Charts[0].Members > 0 && list.Charts[0].Ready == list.Charts[0].Members && len(list.Charts[0].PerMember) == list.Charts[0].Members {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the chart release is not ready on every member: %+v", list.Charts)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c := list.Charts[0]
	fmt.Printf("\n$ curl -H \"Authorization: Bearer $EDITOR\" %s/charts\n", a.url)
	fmt.Printf("%s: %s %s, %d of %d members ready\n", c.Name, c.Delivered.Name, c.Delivered.Version, c.Ready, c.Members)
	for _, m := range c.PerMember {
		fmt.Printf("  %-10s %-8s %s\n", m.Cluster, m.Phase, m.Revision)
	}
	return nil
}

// call sends a request to fleet-api as token, and decodes its answer into out (when not nil).
func (a *fleetAPI) call(ctx context.Context, token, method, path string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

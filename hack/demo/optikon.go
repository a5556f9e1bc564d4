package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/localfleet"
)

// optikonAccount is the demo's caller of Optikon's API: it may edit the set (its Releases and
// Placements, and the Secrets an uploaded chart is kept in).
const optikonAccount = "optikon-ui"

// optikon shows Optikon's own API on fleet-api: the set's Clusters as /v0/clusters answers them,
// then a chart uploaded as Optikon's UI uploads it, installed by Helm on every member, and listed
// per member as Helm there reports it.
func (a *fleetAPI) optikon(ctx context.Context, lf *localfleet.Fleet) error {
	token, err := optikonToken(ctx, lf)
	if err != nil {
		return err
	}
	fmt.Printf("$ OPTIKON=$(kubectl create token %s -n %s)   # bound to edit and clusterregistry-edit in %s\n", optikonAccount, lf.Namespace, lf.Namespace)
	fmt.Printf("$ curl -H \"Authorization: Bearer $OPTIKON\" %s/v0/clusters\n", a.url)
	var clusters []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := a.call(ctx, token, http.MethodGet, "/v0/clusters", nil, http.StatusOK, &clusters); err != nil {
		return err
	}
	fmt.Println("(an array of the set's Clusters; of each, what Optikon's UI reads:)")
	for _, c := range clusters {
		labels, _ := json.Marshal(c.Metadata.Labels)
		fmt.Printf("  %-9s labels=%s NumPods=%s Health=%s\n", c.Metadata.Name, labels, c.Metadata.Annotations["NumPods"], c.Metadata.Annotations["Health"])
	}
	archive, err := chartrender.Package("greeter", demoChart)
	if err != nil {
		return err
	}
	fmt.Printf("\n$ curl -H \"Authorization: Bearer $OPTIKON\" -F name=hello -F namespace=optikon -F chartTar=@greeter-1.0.0.tgz '%s/v0/releases?labels=env=demo'\n", a.url)
	answer, err := a.upload(ctx, token, "/v0/releases?labels=env=demo", archive)
	if err != nil {
		return err
	}
	fmt.Println(answer)
	return a.optikonReleases(ctx, token, len(lf.Members))
}

// optikonReleases waits until GET /v0/releases lists the release on every member, and prints it.
func (a *fleetAPI) optikonReleases(ctx context.Context, token string, members int) error {
	var rows []struct {
		Name, Namespace, OnCluster string
		Version                    int
		Chart                      struct {
			Metadata struct{ Name, Version string }
		}
		Info struct{ Status struct{ Code string } }
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if err := a.call(ctx, token, http.MethodGet, "/v0/releases", nil, http.StatusOK, &rows); err != nil {
			return err
		}
		deployed := 0
		for _, r := range rows {
			if r.Info.Status.Code == "DEPLOYED" {
				deployed++
			}
		}
		if deployed == members {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Optikon release is not deployed on every member: %+v", rows)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].OnCluster < rows[j].OnCluster })
	fmt.Printf("\n$ curl -H \"Authorization: Bearer $OPTIKON\" %s/v0/releases\n", a.url)
	fmt.Println("(one Helm release a member, as Helm there reports it:)")
	for _, r := range rows {
		fmt.Printf("  %s on %s: revision %d, chart %s %s, %s, namespace %s\n", r.Name, r.OnCluster, r.Version, r.Chart.Metadata.Name, r.Chart.Metadata.Version, r.Info.Status.Code, r.Namespace)
	}
	return nil
}

// upload POSTs a chart as Optikon's UI does (multipart: name, namespace, chartTar), and returns
// fleet-api's answer.
func (a *fleetAPI) upload(ctx context.Context, token, path string, archive []byte) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("name", "hello")
	_ = mw.WriteField("namespace", "optikon")
	part, _ := mw.CreateFormFile("chartTar", "greeter-1.0.0.tgz")
	_, _ = part.Write(archive)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+path, &buf)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST %s: %d: %s", path, resp.StatusCode, body)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, body)
	return compact.String(), nil
}

// optikonToken makes the demo's Optikon caller and returns a token of it.
func optikonToken(ctx context.Context, lf *localfleet.Fleet) (string, error) {
	kube, err := kubernetes.NewForConfig(lf.Registry.Config)
	if err != nil {
		return "", err
	}
	ns := lf.Namespace
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: optikonAccount}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	for _, role := range []string{"edit", "clusterregistry-edit"} {
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: optikonAccount + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: optikonAccount, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, optikonAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

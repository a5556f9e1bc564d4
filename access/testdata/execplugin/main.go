// Command execplugin is a client.authentication.k8s.io exec plugin for tests. It prints the token
// in $TEST_TOKEN_FILE, valid for $TEST_EXPIRY_SECONDS, appends a line to $TEST_COUNT_FILE each
// time it runs, and writes the cluster server it was given to $TEST_INFO_FILE.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "execplugin:", err)
		os.Exit(1)
	}
}

func run() error {
	token, err := os.ReadFile(os.Getenv("TEST_TOKEN_FILE"))
	if err != nil {
		return err
	}
	count, err := os.OpenFile(os.Getenv("TEST_COUNT_FILE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer count.Close()
	if _, err := count.WriteString("ran\n"); err != nil {
		return err
	}

	var info struct {
		Spec struct {
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"spec"`
	}
	if raw := os.Getenv("KUBERNETES_EXEC_INFO"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return err
		}
	}
	if path := os.Getenv("TEST_INFO_FILE"); path != "" {
		if err := os.WriteFile(path, []byte(info.Spec.Cluster.Server), 0o600); err != nil {
			return err
		}
	}

	seconds, _ := strconv.Atoi(os.Getenv("TEST_EXPIRY_SECONDS"))
	status := map[string]any{"token": strings.TrimSpace(string(token))}
	if seconds > 0 {
		status["expirationTimestamp"] = time.Now().Add(time.Duration(seconds) * time.Second).UTC().Format(time.RFC3339)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1",
		"kind":       "ExecCredential",
		"status":     status,
	})
}

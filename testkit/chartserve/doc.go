// Package chartserve serves Helm charts to tests, in memory and over TLS: an OCI registry
// (go-containerregistry's) that charts are pushed to with Helm's own registry client, and an HTTP
// chart repository (an index.yaml written with Helm's own index type, and the archives). Each
// counts the requests it hears, can ask for credentials, and lets a test answer a request its own
// way (a redirect, an endless body), so that tests play the repository an attacker runs.
package chartserve

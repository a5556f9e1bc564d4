package join

import (
	"errors"
	"fmt"
)

// NoClusterRoleError is Join's error when the member has no ClusterRole of Options.ClusterRole: a
// binding to it would grant nothing, silently. Nothing was done.
type NoClusterRoleError struct {
	ClusterRole, Server string
}

func (e *NoClusterRoleError) Error() string {
	return fmt.Sprintf("member: ClusterRole %q does not exist on %s (nothing was done); choose one that does (kubectl get clusterroles)", e.ClusterRole, e.Server)
}

// NameTakenError is Join's error when the cluster set has a Cluster of that name for another
// server: it is not this member's to overwrite. Nothing was done.
type NameTakenError struct {
	Namespace, Name string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("cluster %s/%s already exists for another server; choose another name, or unjoin it first", e.Namespace, e.Name)
}

// CredentialArgError is Join's error, with Options.Exec, when the plugin has an argument that
// passes a credential (such as --oidc-client-secret=...): the registry would show it to every
// reader of the cluster set. Flag names the argument, never its value. Nothing was done; with
// Options.DropCredentialArgs the plugin is registered without it.
type CredentialArgError struct {
	Flag string
}

func (e *CredentialArgError) Error() string {
	return fmt.Sprintf("the exec plugin's argument %s passes a credential, which the registry would show every reader of the cluster set; "+
		"give the plugin that credential on the readers' side (a file, its environment), or leave the argument out (DropCredentialArgs)", e.Flag)
}

// ErrNoExecPlugin is Join's error, with Options.Exec, when the member config's user runs no exec
// plugin: there is nothing to register. Nothing was done.
var ErrNoExecPlugin = errors.New("its user runs no exec plugin, so there is nothing to register as the Cluster's exec provider")

// MemberError is Unjoin's error when the member could not be read before anything was removed:
// nothing was removed, on either side.
type MemberError struct {
	Err error
}

func (e *MemberError) Error() string { return e.Err.Error() + " (nothing was removed)" }
func (e *MemberError) Unwrap() error { return e.Err }

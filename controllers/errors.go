package controllers

import "fmt"

// ControllerError is why New could not make one of the controllers it was asked for: its options
// are wrong (Invalid), or the registry lacks what it needs (a CRD it does not serve, or a
// discovery that failed). A command names its own flag for Controller from it.
type ControllerError struct {
	// Controller is the controller's name: Health, Rotation, ClusterProfiles or Placements.
	Controller string
	// Invalid says that the options given are wrong, rather than the registry.
	Invalid bool
	Err     error
}

func (e *ControllerError) Error() string {
	return fmt.Sprintf("controller %s: %v", e.Controller, e.Err)
}

func (e *ControllerError) Unwrap() error { return e.Err }

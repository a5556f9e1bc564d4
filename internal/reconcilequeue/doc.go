// Package reconcilequeue lets a controller on controller-runtime's controller add keys to its
// queue from anywhere (a Fleet's events, another component's callbacks, a method called before
// the controller starts): controller-runtime makes the queue when the controller starts and
// hands it only to sources, so a Queue is a source that keeps it, and holds the keys added
// before until then.
package reconcilequeue

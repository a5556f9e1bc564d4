// Package capacity is what a member cluster can hold: Observe reads its Nodes and Pods into the
// figures of a Cluster's status.resources (v1alpha1.ClusterResources), and Moved says whether
// new figures moved far enough from those last written to write again, so that Pods coming and
// going write nothing until they add up.
//
// The figures count the Nodes that can take Pods now (Ready, not cordoned); taints are not
// judged, as a Pod's tolerations are not known here. largestFree is each resource's most free
// on any one Node: one Node's free (the one with the most cpu) would hide another Node's gpus.
//
// Controller keeps status.resources and status.properties: from per-member caches of Nodes,
// Pods (fleetcache, each object cut to what Observe reads) and, where the member serves the
// About API, ClusterProperties (Properties), it observes each member every Interval and writes,
// with server-side apply of those two fields alone, only what Moved, a changed property or a
// Heartbeat asks for. Hosted
// in package controllers, it works on the Host's members: a shard replica's own, as health does.
package capacity

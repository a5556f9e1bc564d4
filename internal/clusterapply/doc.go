// Package clusterapply applies a Cluster to the registry by server-side apply and says what
// changed, for join and the command's import.
package clusterapply

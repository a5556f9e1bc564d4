// Package testcerts makes throwaway certificates for this module's tests.
package testcerts

package clusterregistry_test

import "testing"

func TestSmoke(t *testing.T) { t.Log(env.Config.Host) }

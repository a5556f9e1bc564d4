package delivery

import (
	"fmt"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A revision's record is a ControllerRevision in the Release's cluster set, which whoever may
// write ControllerRevisions there could have written or changed. A record is put back only when
// it renders to the revision its label names: the revision is a hash of what it renders to, so
// a record changed after the releases controller wrote it is refused. (Which revision a rollback
// returns to comes from the Release's status, not from the records: see lastComplete.)

// RecordMismatchError is a revision whose record does not render to the revision it is labelled
// with: the record was changed after the releases controller wrote it, or a ConfigMap or Secret
// its source names has changed since.
type RecordMismatchError struct {
	// Number and Hash are the revision's, as its record is labelled.
	Number int64
	Hash   string
	// Renders is the revision the record renders to now.
	Renders string
}

func (e *RecordMismatchError) Error() string {
	return fmt.Sprintf("revision %d's record renders to revision %s, not to %s as it is labelled: the record was changed after the releases controller wrote it, or a ConfigMap or Secret its source names has changed since; it is not put back",
		e.Number, e.Renders, e.Hash)
}

// VerifyUndo renders undone (Undo of a Release to revision to) with in (ReadInputs of undone)
// and says, as a *RecordMismatchError, when it does not render to the revision to is labelled
// with: a tool calls it before it writes an undo (clusterregistry rollout undo does).
func VerifyUndo(undone *v1alpha1.Release, to Revision, in Inputs) error {
	_, err := renderRecorded(undone, to, in)
	return err
}

// renderRecorded renders undone, revision to put back, refusing a record that does not render
// to its revision.
func renderRecorded(undone *v1alpha1.Release, to Revision, in Inputs) (*Bundle, error) {
	b, err := Render(undone, in)
	if err != nil {
		return nil, fmt.Errorf("revision %d's record: %w", to.Number, err)
	}
	if b.Revision != to.Hash {
		return nil, &RecordMismatchError{Number: to.Number, Hash: to.Hash, Renders: b.Revision}
	}
	return b, nil
}

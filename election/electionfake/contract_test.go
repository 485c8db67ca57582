package electionfake_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionfake"
	"github.com/sqlelect/sqlelect/election/electiontest"
)

// TestContract runs the behaviour suite's callback-contract tests, which the
// real backends pass on a real server, against the fake.
func TestContract(t *testing.T) {
	electiontest.RunContract(t, func(t *testing.T) electiontest.Driver { return &driver{t: t} })
}

// driver drives fakes through their methods.
type driver struct{ t *testing.T }

func (d *driver) Candidate(id string, cb election.Callbacks) election.Election {
	f, err := electionfake.New(election.Config{Name: "contract", ID: id, Callbacks: cb})
	if err != nil {
		d.t.Fatal(err)
	}
	return f
}

func (d *driver) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

func (d *driver) Elect(e election.Election) {
	if _, err := e.(*electionfake.Fake).Elect(d.ctx()); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) Hand(e election.Election, to string) {
	if _, err := e.(*electionfake.Fake).SetLeader(d.ctx(), to); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) LoseLease(e election.Election) {
	if err := e.(*electionfake.Fake).Depose(d.ctx(), election.ReasonLeaseLost); err != nil {
		d.t.Fatal(err)
	}
}

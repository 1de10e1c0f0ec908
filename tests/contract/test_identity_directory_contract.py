"""The IdentityDirectory port on every store adapter: group memberships of principals,
each call standing alone (no unit of work)."""

from __future__ import annotations

from apollo_domain.ports import Store


async def test_adding_and_removing_a_membership_is_idempotent(store: Store) -> None:
    directory = store.directory
    for _ in range(2):
        await directory.add_membership("alice", "red")
    await directory.add_membership("bob", "red")
    await directory.add_membership("carol", "blue")
    for _ in range(2):
        await directory.remove_membership("bob", "red")
    await directory.remove_membership("nobody", "red")

    assert frozenset({"red"}) == await directory.groups_of("alice")
    assert frozenset() == await directory.groups_of("bob")
    assert frozenset({"alice"}) == await directory.members_of(["red"])
    assert frozenset({"alice", "carol"}) == await directory.members_of(["red", "blue"])


async def test_a_principal_belongs_to_each_of_its_groups(store: Store) -> None:
    directory = store.directory
    for group in ("red", "blue", "green"):
        await directory.add_membership("alice", group)
    await directory.add_membership("bob", "blue")
    await directory.remove_membership("alice", "green")

    assert frozenset({"red", "blue"}) == await directory.groups_of("alice")
    assert frozenset({"alice", "bob"}) == await directory.members_of(["blue"])
    assert frozenset({"alice", "bob"}) == await directory.members_of(("red", "blue", "red"))
    assert frozenset() == await directory.members_of(["green"])


async def test_unknown_principals_and_groups_are_empty_not_errors(store: Store) -> None:
    directory = store.directory
    await directory.add_membership("alice", "red")
    groups = await directory.groups_of("nobody")
    members = await directory.members_of(["nowhere"])
    assert (frozenset(), frozenset()) == (groups, members)
    assert isinstance(groups, frozenset) and isinstance(members, frozenset)
    assert frozenset() == await directory.members_of([])

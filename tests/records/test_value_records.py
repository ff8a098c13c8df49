"""The records' value facts, computed once on the record: where backends' numbers part (within
the output dtype's tolerance they agree), a finding's element, every expectation's standing."""

from __future__ import annotations

from dtype_explorer.records import (
    Expectation,
    Numerics,
    OutputValues,
    ProbeResult,
    ProbeSet,
    ProbeSpec,
)


def result(backend: str, head: tuple, dtype: str = "float32", **numerics) -> ProbeResult:
    values = OutputValues(
        dtype=dtype, shape=(2, 2), head=head, abs_sum=sum(abs(x or 0) for x in head)
    )
    return ProbeResult(
        spec=ProbeSpec(target="Dense", backend=backend),
        status="ok",
        backend=backend,
        output_dtype=dtype,
        numerics=Numerics(outputs=(values,), **numerics),
    )


def test_numbers_within_the_dtype_tolerance_agree():
    near = ProbeSet(
        results=(result("jax", (1.0, 2.0, 3.0, 4.0)), result("torch", (1.0, 2.0, 3.0, 4.000001)))
    )
    assert near.value_divergence() is None


def test_numbers_beyond_it_are_named_at_their_first_element():
    far = ProbeSet(
        results=(result("jax", (1.0, 2.0, 3.0, 4.0)), result("torch", (1.0, 2.0, 0.0, 4.0)))
    )
    parted = far.value_divergence()
    assert parted.element == (1, 0) and parted.values == {"jax": 3.0, "torch": 0.0}
    assert "output 0 [1, 0]" in parted.message and "numbers diverge" in far.summary()
    # float16 tolerates what float32 does not
    loose = ProbeSet(
        results=(
            result("jax", (1.0, 2.0, 3.0, 4.0), "float16"),
            result("torch", (1.0, 2.0, 3.0, 4.004), "float16"),
        )
    )
    assert loose.value_divergence() is None


def test_inf_against_a_number_parts_and_random_layers_are_not_compared():
    bad = ProbeSet(
        results=(result("jax", (1.0, None, 3.0, 4.0)), result("numpy", (1.0, 2.0, 3.0, 4.0)))
    )
    assert bad.value_divergence().element == (0, 1)
    drawn = ProbeSet(
        results=(
            result("jax", (1.0, 2.0, 3.0, 4.0), comparable=False),
            result("numpy", (9.0, 2.0, 3.0, 4.0), comparable=False),
        )
    )
    assert drawn.value_divergence() is None


def test_rules_disagree_and_disagreements_name_the_odd_expectation():
    r = result("torch", (1.0, 2.0, 3.0, 4.0), "float64").model_copy(
        update={
            "expectations": (
                Expectation(source="policy", dtype="float64", basis="compute dtype"),
                Expectation(source="result_type", dtype="float32", basis="result_type(...)"),
                Expectation(source="declared", dtype="float64"),
            ),
            "expected_by": "policy",
        }
    )
    assert [x.source for x in r.disagreements()] == ["result_type"]
    assert r.rules_disagree().startswith("Keras's rules disagree here: policy says float64")
    round_trip = ProbeResult.from_json(r.to_json())
    assert round_trip.rules_disagree() == r.rules_disagree()


def test_the_odd_expectations_travel_in_the_json_for_the_page():
    """The widget's page flags disagreeing expectations from the JSON: computed here, once."""
    r = result("torch", (1.0, 2.0, 3.0, 4.0), "float64").model_copy(
        update={
            "expectations": (
                Expectation(source="policy", dtype="float64", basis="compute dtype"),
                Expectation(source="numpy", dtype="float32", basis="np.add"),
            ),
            "expected_by": "policy",
        }
    )
    sent = r.to_dict()
    assert sent["disagreeing"] == ["numpy"]
    assert [x["name"] for x in sent["expectations"]] == ["policy", "np"]
    assert sent["rules_disagreement"] == r.rules_disagree()
    assert ProbeResult.from_dict(sent) == r  # computed facts are recomputed on the way back


def test_a_fix_that_clears_the_finding_but_raises_is_no_fix_and_says_so():
    """``keras.Input(dtype="int64")`` for int64 ids an int32 Input wrapped: the lossy cast is
    gone, but the Embedding raises on the id (beyond its table): no fix, and no "did not clear
    the finding" (it did), nor "their own rows" for ids the table has none for."""
    from dtype_explorer.records import FixMeasure, FixProof

    before = FixMeasure(finding=True, readers=("m/emb",), ids=2, ids_changed=1)
    after = FixMeasure(finding=False, readers=("m/emb",), ids=2, ids_changed=0,
                       raised="InvalidArgumentError")  # fmt: skip
    proof = FixProof(how="input-dtype", input_index=0, input_dtype="int64", before=before,
                     after=after)  # fmt: skip
    assert proof.summary() == (
        "no fix shown: the audit ran input 0 as keras.Input(dtype='int64') on a copy; the "
        "finding went, but the copy did not run right either (after, below)"
    )
    assert after.text() == (
        "the finding is gone; m/emb received all 2 ids as given; m/emb raised InvalidArgumentError"
    )
    kept = after.model_copy(update={"raised": ""})
    assert kept.text().endswith("received all 2 ids as given (their own rows)")
    still = after.model_copy(update={"finding": True, "raised": ""})
    assert proof.model_copy(update={"after": still}).summary().endswith("did not clear the finding")


def test_a_layers_headroom_names_which_value_sits_below_the_smallest_normal():
    """Old code: "amax 0.0095, headroom 22.7 bits to the largest finite, -3.6 above the
    smallest normal", as if 0.0095 were below float16's 6.1e-05; the bits are of the smallest
    non-zero value, which had become subnormal."""
    from dtype_explorer.records import LayerDamage

    d = LayerDamage(path="m/d", layer_class="Dense", dtype="float16", reference="float32",
                    rel_rms=0.0008, max_abs_error=9e-6, amax=0.0095, top_bits=22.7,
                    bottom_bits=-3.6)  # fmt: skip
    assert d.text().endswith(
        "headroom 22.7 bits to the largest finite, its smallest non-zero value 3.6 bits below "
        "the smallest normal (subnormal)"
    )

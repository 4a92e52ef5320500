"""Health rules on hand-made figures (engine.watch.health), and the spec groups that set them
(engine.spec.watch_group)."""

from __future__ import annotations

import math

import pytest

from engine.spec.schema import SpecError, parse_spec
from engine.spec.watch_group import HealthSpec, NotifySpec, watch_warnings
from engine.watch import health

NAN, INF = float("nan"), float("inf")


class TestNumbers:
    def test_event_text_is_read_back(self):
        # events.jsonl writes NaN / inf as text (JSON has neither)
        assert math.isnan(health.number("nan"))
        assert health.number("inf") == INF
        assert health.number(2) == 2.0
        assert health.number(None) is None
        assert health.number("loss") is None
        assert health.number(True) is None


class TestLossNan:
    def test_nan_and_inf_fire(self):
        assert health.loss_not_finite(NAN) == "loss nan"
        assert health.loss_not_finite(-INF) == "loss -inf"

    def test_finite_and_missing_do_not(self):
        assert health.loss_not_finite(0.0) is None
        assert health.loss_not_finite(1e9) is None
        assert health.loss_not_finite(None) is None


class TestLossSpike:
    def test_above_k_times_median_fires(self):
        recent = [2.0, 1.0, 3.0, 100.0, 2.0]  # median 2.0: one outlier does not move it
        msg = health.loss_spike(10.1, recent, 5.0)
        assert msg is not None and msg.key == "watch.health_loss_spike"
        assert msg.params["median"] == "2"

    def test_at_or_under_k_times_median_does_not(self):
        assert health.loss_spike(10.0, [2.0, 2.0, 2.0], 5.0) is None
        assert health.loss_spike(3.0, [2.0, 2.0, 2.0], 5.0) is None

    def test_needs_history_and_ignores_nan(self):
        assert health.loss_spike(100.0, [1.0, 1.0], 5.0) is None
        assert health.loss_spike(100.0, [1.0, NAN, 1.0], 5.0) is None  # two finite values only
        assert health.loss_spike(NAN, [1.0, 1.0, 1.0], 5.0) is None  # the NaN rule's business


class TestGradNorm:
    def test_non_finite_always_fires(self):
        assert health.grad_norm_blowup(INF, 1e9).key == "watch.health_grad_not_finite"
        assert health.grad_norm_blowup(NAN, 1e9).key == "watch.health_grad_not_finite"

    def test_limit(self):
        assert health.grad_norm_blowup(1001.0, 1000.0).key == "watch.health_grad_norm"
        assert health.grad_norm_blowup(1000.0, 1000.0) is None
        assert health.grad_norm_blowup(None, 1000.0) is None


class TestLrZero:
    def test_zero_after_warmup_with_steps_left(self):
        msg = health.lr_zero(0.0, 50, 10, 100)
        assert msg.key == "watch.health_lr_zero" and msg.params["remaining"] == 50

    def test_warmup_last_step_and_positive(self):
        assert health.lr_zero(0.0, 10, 10, 100) is None  # still warming up
        assert health.lr_zero(0.0, 100, 10, 100) is None  # the schedule's end
        assert health.lr_zero(1e-7, 50, 10, 100) is None


class TestThroughput:
    def test_collapse_under_fraction_of_median(self):
        msg = health.throughput_collapse(150.0, [1000.0, 900.0, 1100.0], 0.2)
        assert msg.key == "watch.health_throughput" and msg.params["median"] == "1000"

    def test_at_fraction_or_without_history(self):
        assert health.throughput_collapse(200.0, [1000.0, 1000.0, 1000.0], 0.2) is None
        assert health.throughput_collapse(1.0, [1000.0, 1000.0], 0.2) is None
        assert health.throughput_collapse(None, [1000.0] * 5, 0.2) is None


def early_stop_at(evals: list[tuple[float, float | None]], patience: int, min_delta: float = 0.0) -> int | None:
    """An independent reading of early stopping over whole curves: the first evaluation index at which the best eval
    loss (bettered only by more than min_delta) lies patience or more evaluations back and the training loss since
    it fell."""
    for end in range(len(evals)):
        seen = evals[: end + 1]
        best = min(range(len(seen)), key=lambda i: (seen[i][0], i))
        # the best as early stopping keeps it: a later lower value within min_delta does not replace it
        first_best = 0
        for i in range(1, len(seen)):
            if seen[i][0] < seen[first_best][0] - min_delta:
                first_best = i
        best = first_best if min_delta else best
        if end - best >= patience and seen[-1][1] < seen[best][1]:
            return end
    return None


class TestOverfit:
    def test_eval_rising_while_train_falls(self):
        evals = [(1.0, 2.0), (1.1, 1.5), (1.2, 1.2), (1.3, 0.9)]
        msg = health.eval_overfit(evals, 3)
        assert msg.key == "watch.health_overfit"
        assert (msg.params["best"], msg.params["now"], msg.params["n"]) == ("1", "1.3", 3)
        assert (msg.params["train_from"], msg.params["train_to"]) == ("2", "0.9")
        assert str(msg).startswith("overfitting: no better eval loss for 3 evaluations (best 1, now 1.3)")

    def test_not_enough_evaluations_since_the_best(self):
        assert health.eval_overfit([(1.0, 2.0), (1.1, 1.5), (1.2, 1.2)], 3) is None
        # a new best at the third evaluation starts the count again
        assert health.eval_overfit([(1.0, 2.0), (1.1, 1.5), (0.9, 1.2), (1.3, 0.9)], 3) is None

    def test_train_rising_too_is_not_overfitting(self):
        assert health.eval_overfit([(1.0, 1.0), (1.1, 1.1), (1.2, 1.2), (1.3, 1.3)], 3) is None

    def test_a_wobbling_curve_fires(self):
        """A full fine-tune's held-out loss, 5.02 -> 7.06 over twelve evaluations, best at the third, its rises broken
        by small dips: never three rises in a row, so the old rule never fired; early stopping's test does, three
        evaluations after the best."""
        evals_loss = [5.02, 4.71, 4.55, 4.80, 4.76, 5.31, 5.22, 5.90, 5.84, 6.52, 6.47, 7.06]
        train = [4.9, 4.2, 3.6, 3.0, 2.5, 2.0, 1.6, 1.2, 0.9, 0.6, 0.4, 0.3]
        evals = list(zip(evals_loss, train))
        fired = [i for i in range(len(evals)) if health.eval_overfit(evals[: i + 1], 3) is not None]
        assert fired and fired[0] == early_stop_at(evals, 3) == 5
        msg = health.eval_overfit(evals, 3)
        assert (msg.params["n"], msg.params["best"], msg.params["now"]) == (9, "4.55", "7.06")

    def test_min_delta_counts_small_improvements_as_none(self):
        evals = [(2.0, 3.0), (1.99, 2.5), (1.985, 2.0), (1.98, 1.5)]
        assert health.eval_overfit(evals, 3) is None  # each a new best
        assert health.eval_overfit(evals, 3, min_delta=0.05) is not None
        assert early_stop_at(evals, 3, 0.05) == 3 and early_stop_at(evals, 3) is None

    def test_old_name_of_patience_is_read(self):
        from engine.spec.schema import parse_spec

        spec = parse_spec({"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}, "health": {"eval_rises": 5}})
        assert spec.health.eval_patience == 5


class TestDisk:
    def test_free_under_margin_times_checkpoint(self):
        msg = health.disk_low(100 * 2**20, 80 * 2**20, 1.5)
        assert msg.key == "watch.health_disk" and msg.params["need_mib"] == 120.0

    def test_enough_room_or_unknown(self):
        assert health.disk_low(120 * 2**20, 80 * 2**20, 1.5) is None
        assert health.disk_low(None, 80 * 2**20, 1.5) is None
        assert health.disk_low(1, 0, 1.5) is None


class TestStallAndGpus:
    def test_stall(self):
        assert health.stalled(301.0, 300.0).params == {"idle_s": 301, "limit_s": 300}
        assert health.stalled(299.0, 300.0) is None
        assert health.stalled(None, 300.0) is None

    def test_gpu_memory(self):
        gpus = [
            {"index": 0, "memory_used_mib": 1000, "memory_total_mib": 80000},
            {"index": 1, "memory_used_mib": 78000, "memory_total_mib": 80000},
        ]
        msg = health.gpu_memory_full(gpus, 0.97)
        assert msg.params["gpu"] == 1 and msg.params["pct"] == 97.5
        assert health.gpu_memory_full(gpus, 0.98) is None
        assert health.gpu_memory_full([], 0.5) is None

    def test_gpu_idle_over_the_whole_span(self):
        now = 10_000.0
        gpus = [{"index": 0, "utilization_pct": 0}, {"index": 1, "utilization_pct": 90}]
        samples = [{"ts": now - 400 + i * 10, "gpus": [dict(g) for g in gpus]} for i in range(41)]
        msg = health.gpu_idle(samples, 5.0, now)
        assert msg.params["gpu"] == 0
        samples[-3]["gpus"][0]["utilization_pct"] = 40  # one busy sample in the span: not idle
        assert health.gpu_idle(samples, 5.0, now) is None

    def test_gpu_idle_needs_the_span_watched(self):
        now = 10_000.0
        samples = [{"ts": now - 100 + i, "gpus": [{"index": 0, "utilization_pct": 0}]} for i in range(100)]
        assert health.gpu_idle(samples, 5.0, now) is None


class TestHealthWatch:
    def test_demo_divergence_is_caught_at_the_first_non_finite_grad_norm(self):
        # the figures of the demo at learning rate 1.0 (tests/engine/test_health_runs.py runs it for real)
        watch = health.HealthWatch(HealthSpec(), warmup_steps=2, max_steps=400)
        steps = [(1, 7.3, 1.86, 0.0), (2, 7.37, 1.9, 0.5), (3, 7.2, 11.4, 1.0), (4, 7.2, 0.18, 0.99)]
        steps.append((5, 6.7, INF, 0.99))
        fired = []
        for step, loss, grad, lr in steps:
            fired += watch.observe_log(step, loss=loss, grad_norm=grad, learning_rate=lr, tokens_per_second=1000)
        assert [(a.rule, a.step, a.action) for a in fired] == [("grad_norm", 5, "stop")]
        assert str(fired[0].reason) == "gradient norm inf"

    def test_fires_once_per_episode(self):
        watch = health.HealthWatch(HealthSpec())
        rules = [[a.rule for a in watch.observe_log(s, loss=v)] for s, v in enumerate([NAN, NAN, 1.0, "nan"], 1)]
        assert rules == [["loss_nan"], [], [], ["loss_nan"]]

    def test_grpo_surrogate_loss_is_not_judged_for_spikes(self):
        """GRPO's tiny losses (a bench run's 7.6e-05 median, then 4.0e-04) read as a spike to the rule; a watch for a
        surrogate loss leaves them alone and still says a NaN."""
        losses = [7.6e-05, 6.9e-05, 8.1e-05, 4.0e-04]
        plain = health.HealthWatch(HealthSpec())
        fired = [a.rule for s, v in enumerate(losses, 1) for a in plain.observe_log(s, loss=v)]
        assert fired == ["loss_spike"]
        grpo = health.HealthWatch(HealthSpec(), surrogate_loss=True)
        assert [a for s, v in enumerate(losses, 1) for a in grpo.observe_log(s, loss=v)] == []
        assert [a.rule for a in grpo.observe_log(5, loss=NAN)] == ["loss_nan"]

    def test_off_rules_are_not_judged(self):
        watch = health.HealthWatch(HealthSpec(loss_nan="off", grad_norm="off"))
        assert watch.observe_log(1, loss=NAN, grad_norm=NAN) == []

    def test_throughput_skips_the_interval_after_an_eval_or_a_save(self):
        watch = health.HealthWatch(HealthSpec())
        for step in range(1, 6):
            assert watch.observe_log(step, loss=1.0, tokens_per_second=1000) == []
        watch.interrupted()
        assert watch.observe_log(6, loss=1.0, tokens_per_second=10) == []
        assert [a.rule for a in watch.observe_log(7, loss=1.0, tokens_per_second=10)] == ["throughput"]

    def test_overfitting_from_evals(self):
        watch = health.HealthWatch(HealthSpec(eval_patience=2))
        fired = []
        for i, (train, ev) in enumerate([(3.0, 2.0), (2.0, 2.1), (1.0, 2.2)]):
            watch.observe_log(2 * i + 1, loss=train)
            fired += watch.observe_eval(2 * i + 2, ev)
        assert [(a.rule, a.step) for a in fired] == [("eval_overfit", 6)]

    def test_alert_event(self, tmp_path):
        from engine.core.events import read_all
        from engine.core.messages import from_json

        watch = health.HealthWatch(HealthSpec())
        (alert,) = watch.observe_log(7, loss=INF)
        alert.write(tmp_path / "events.jsonl")
        (ev,) = read_all(tmp_path / "events.jsonl")
        assert ev["type"] == "alert" and ev["step"] == 7
        assert ev["payload"]["rule"] == "loss_nan" and ev["payload"]["action"] == "stop"
        assert ev["payload"]["figures"] == {"loss": "inf"}
        assert from_json(ev["payload"]["reason_msg"]).key == "watch.health_loss_nan"

    def test_stop_reason(self):
        what = health.loss_not_finite(NAN)
        assert health.stop_reason(what, 812, "checkpoint-800", False) == (
            "stopped by health rule: loss nan at step 812; checkpoint-800 kept"
        )
        assert health.stop_reason(what, 812, None, False).endswith("no checkpoint kept")
        assert health.stop_reason(what, 812, "checkpoint-812", True).endswith("checkpoint-812 saved")


class TestSpec:
    def _spec(self, **groups) -> dict:
        return {"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}, **groups}

    def test_defaults(self):
        spec = parse_spec(self._spec())
        assert spec.health.loss_nan == "stop" and spec.health.grad_norm == "stop"
        assert spec.notify.webhook_env == "" and spec.notify.email_to == []

    def test_unknown_field_and_bad_action(self):
        with pytest.raises(SpecError, match="health.loss_nann"):
            parse_spec(self._spec(health={"loss_nann": "stop"}))
        with pytest.raises(SpecError, match="health.loss_spike"):
            parse_spec(self._spec(health={"loss_spike": "panic"}))
        with pytest.raises(SpecError, match="health.loss_spike_factor"):
            parse_spec(self._spec(health={"loss_spike_factor": 1.0}))

    def test_email_needs_smtp_and_addresses(self):
        with pytest.raises(SpecError, match="notify.smtp_host"):
            parse_spec(self._spec(notify={"email_to": ["a@b.c"]}))
        with pytest.raises(SpecError, match="notify.email_to.0"):
            parse_spec(self._spec(notify={"email_to": ["nobody"], "smtp_host": "127.0.0.1"}))

    def test_env_names_only(self):
        with pytest.raises(SpecError, match="notify.webhook_env"):
            parse_spec(self._spec(notify={"webhook_env": "https://hooks.slack.com/services/T/B/x"}))

    def test_missing_secret_is_a_warning(self):
        spec = NotifySpec(webhook_env="HOOK_URL")
        assert [p for p, _ in watch_warnings(spec, {})] == ["notify.webhook_env"]
        assert watch_warnings(spec, {"HOOK_URL": "http://127.0.0.1:1/"}) == []


class TestSentinel:
    """The wrapper's watch (engine.watch.sentinel) on a hand-made run folder: GPU samples and alerts."""

    def _spec(self, **health_values):
        from engine.spec.schema import RunSpec

        return RunSpec.model_validate(
            {"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}, "health": {"stall": "off", **health_values}}
        )

    def test_gpu_memory_stop_writes_the_alert_and_asks_for_the_stop(self, tmp_path):
        import json

        from engine.core.events import append_event, read_all
        from engine.watch.sentinel import Sentinel

        append_event(tmp_path / "events.jsonl", "log", 7, loss=1.0)
        now = read_all(tmp_path / "events.jsonl")[0]["ts"] + 10
        gpu = {"index": 0, "memory_used_mib": 79_900, "memory_total_mib": 80_000, "utilization_pct": 99}
        (tmp_path / "metrics.jsonl").write_text(json.dumps({"ts": now, "gpus": [gpu]}) + "\n")
        stops, said = [], []
        watch = Sentinel(
            tmp_path, "r1", self._spec(gpu_memory="stop"), stop_run=lambda: stops.append(1), say=said.append
        )
        watch.check(now)
        watch.check(now + 1)  # still full: the same episode, no second alert
        alerts = [e for e in read_all(tmp_path / "events.jsonl") if e["type"] == "alert"]
        assert [(a["step"], a["payload"]["rule"], a["payload"]["action"]) for a in alerts] == [
            (7, "gpu_memory", "stop")
        ]
        assert alerts[0]["payload"]["figures"]["pct"] == 99.9
        assert stops == [1]
        told = json.loads((tmp_path / health.STOP_FILE).read_text())
        assert told["rule"] == "gpu_memory" and told["step"] == 7

    def test_no_gpu_rules_before_training_or_without_samples(self, tmp_path):
        from engine.core.events import read_all
        from engine.watch.sentinel import Sentinel

        watch = Sentinel(tmp_path, "r1", self._spec(gpu_memory="stop", gpu_idle="stop"), stop_run=None, say=print)
        watch.check(1000.0)
        assert not (tmp_path / "events.jsonl").exists() or read_all(tmp_path / "events.jsonl") == []


class TestRewardFlat:
    def test_flat_for_n_steps(self):
        msg = health.reward_flat([0.3, 0.0, 0.0, 0.0], 3, 0.0)
        assert msg.key == "watch.health_reward_flat" and msg.params == {"n": 3, "reward": "0"}
        assert "studio rewards try SPEC --source model" in str(msg)

    def test_any_spread_or_too_few_steps_is_not_flat(self):
        assert health.reward_flat([0.0, 0.0, 0.01], 3, 0.5) is None
        assert health.reward_flat([0.0, 0.0], 3, 0.0) is None

    def test_watch_fires_once_and_again_after_a_signal(self):
        watch = health.HealthWatch(HealthSpec(reward_flat_steps=2))
        stds = [0.0, 0.0, 0.0, 0.4, 0.0, 0.0]
        fired = [
            (s, [a.rule for a in watch.observe_log(s, loss=0.0, reward=0.0, reward_std=v)])
            for s, v in enumerate(stds, 1)
        ]
        assert [s for s, rules in fired if "reward_flat" in rules] == [2, 6]

    def test_other_stages_are_not_judged(self):
        watch = health.HealthWatch(HealthSpec(reward_flat_steps=1))
        assert watch.observe_log(1, loss=1.0) == []

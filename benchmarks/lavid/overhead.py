"""LaViD's cost: one training step with the signature loss against a CE step, and the signature build.

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/lavid/overhead.py   (--smoke: 20 timed steps per mode)

Prints the median time of a LaViD step (CE + beta * MSE through feature2question) and of a CE step of the same
student on the same batch of 16 Fashion-MNIST images, their ratio (target <= 1.1x), and the time to build
the signature matrix with the MiniLM teacher (10 classes x 30 questions x 5 options, cache bypassed).
"""

from __future__ import annotations

import statistics
import time

import torch


def step_time(mode: str, images, labels, targets, repeats: int = 200) -> float:
    from zoo.lavid.student import make_optimizer, make_student, student_loss

    model = make_student(mode, 10, 150, 0).train()
    optimizer, _ = make_optimizer(model, 0.01, 5e-4, 10)
    times = []
    for i in range(repeats + 20):
        started = time.perf_counter()
        logits, h = model.forward_features(images)
        aux = model.feature2question(h) if model.feature2question is not None else None
        loss, _ = student_loss(mode, logits, aux, labels, targets, 40.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= 20:  # warm-up
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timed steps per mode (after 20 warm-up steps)")
    parser.add_argument("--smoke", action="store_true", help="20 timed steps per mode (seconds)")
    args = parser.parse_args()
    repeats = 20 if args.smoke else args.repeats

    from zoo.lavid.classes import fmnist_class_texts
    from zoo.lavid.data import fmnist_few_shot
    from zoo.lavid.signatures import SentenceEncoderTeacher, build_signatures, load_questions
    from zoo.lavid.student import mode_targets

    torch.set_num_threads(2)
    texts, questions = fmnist_class_texts(), load_questions()
    teacher = SentenceEncoderTeacher()
    teacher.encode(["warm-up"])  # loading MiniLM is not part of the build
    started = time.perf_counter()
    sig = build_signatures(teacher, texts, questions)
    build = time.perf_counter() - started
    x, y = fmnist_few_shot(10, 0)
    images, labels = x[:16], y[:16]
    targets = mode_targets("lavid", sig.matrix, sig.num_options)
    ce = step_time("ce", images, labels, None, repeats)
    lavid = step_time("lavid", images, labels, targets, repeats)
    ce_again = step_time("ce", images, labels, None, repeats)  # CE measured before and after: drift of a shared machine
    ce = min(ce, ce_again)
    print(f"signature build (MiniLM, {len(texts)} classes x {len(questions)} questions x 5): {build:.2f} s")
    print(f"CE step {1e3 * ce:.2f} ms, LaViD step {1e3 * lavid:.2f} ms, ratio {lavid / ce:.3f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()

"""Exercises 11 (the accumulation loop) and 12 (an AdamW step): plausible wrong answers fail, each with
the message that names its mistake; answers that are right another way pass.

Each case edits the reference solution (one replacement that must apply) in a copy of the course.
"""
import os
import re
import shutil

import pytest

from minigrad import grading

ACC = "exercises/solutions/11_the_accumulation_loop.py"
SCALE = "        (summed * (1.0 / total)).backward()  # frees this micro-batch's activations before the next one\n"
COUNT = "int((y.numpy() != ignore_index).sum())"
MB_TOKENS = "int((y[i:i + micro_batch_size].numpy() != ignore_index).sum())"
K = "(-(-x.shape[0] // micro_batch_size))"

ADAM = "exercises/solutions/12_an_adamw_step.py"
DECAY = "        p *= 1 - lr * weight_decay  # decoupled: the decay never enters m or v\n"
UPDATE = "        p -= (lr / bias1) * m / (np.sqrt(v) / math.sqrt(bias2) + eps)\n"
BIAS = "bias1, bias2 = 1 - b1 ** step, 1 - b2 ** step"

WRONG = {
    # exercise 11
    "mean of means": (11, [(SCALE, f"        (summed * (1.0 / ({MB_TOKENS} * {K}))).backward()\n")],
                      r"MEAN OF THE MICRO-BATCH MEANS.*\[23, 22, 3\].*0\.70, 0\.73, 5\.33 times.*Hugging Face"),
    "sum of means": (11, [(SCALE, f"        (summed * (1.0 / {MB_TOKENS})).backward()\n")],
                     r"SUM of the micro-batch means"),
    "padding counted": (11, [(COUNT, "y.numpy().size")], r"all 64 targets, padding included.*48"),
    "no division": (11, [(SCALE, "        summed.backward()\n"), ("loss_sum / total", "loss_sum")],
                    r"SUMMED loss with no division: 48 times too big"),
    "no zero_grad": (11, [("    model.zero_grad()\n", "")], r"plus the 0\.25 that \.grad held.*zero the gradients"),
    "one backward at the end": (11, [("    loss_sum = 0.0\n", "    loss_sum, acc = 0.0, 0.0\n"),
                                     (SCALE, "        acc = summed + acc\n"),
                                     ("    return loss_sum", "    (acc * (1.0 / total)).backward()\n    return loss_sum")],
                                r"memory: with micro_batch_size=1 your loop's activations peaked at [\d,]+ bytes.*"
                                r"one micro-batch of 1 at a time needs [\d,]+.*did not shrink"),
    "whole batch at once": (11, [("range(0, x.shape[0], micro_batch_size)", "[0]"),
                                 ("x[i:i + micro_batch_size]), y[i:i + micro_batch_size]", "x), y")],
                            r"ran the model on batches of \[8\].*\[3, 3, 2\]"),
    "last micro-batch dropped": (11, [("range(0, x.shape[0], micro_batch_size)",
                                       "range(0, x.shape[0] - micro_batch_size + 1, micro_batch_size)")],
                                 r"batches of \[3, 3\].*\[3, 3, 2\]"),
    "no loss returned": (11, [("    return loss_sum / total", "")], r"returned None: return the full batch's mean loss"),
    "an empty micro-batch divides by zero": (
        11, [(SCALE, f"        (summed * (1.0 / ({MB_TOKENS} * {K})) * ({MB_TOKENS} * {K} / total)).backward()\n")],
        r"all padding raised ZeroDivisionError.*holds no token.*the whole batch's token count \(45\)"),
    "an empty micro-batch makes nan": (
        11, [(SCALE, "        count = float((y[i:i + micro_batch_size].numpy() != ignore_index).sum())\n"
                     "        (summed / count * (count / total)).backward()\n")],
        r"all padding: the gradient holds nan or inf.*0 / 0 = nan"),
    "a batch with no token returns nan": (
        11, [('        raise ValueError("accumulate_step: the batch has no token to learn from (every target is '
              'ignore_index)")\n', "        return float('nan')\n")],
        r"every target is padding gave nan: there is no token.*Raise ValueError"),
    "a batch with no token raises late": (
        11, [("    if total == 0:\n        raise", "    if False:\n        raise"),
             (SCALE, "        if total == 0:\n            raise ValueError('none')\n" + SCALE)],
        r"raised ValueError, but only after running the model on \[4\] rows"),
    "loss as a mean of means": (11, [("        loss_sum += summed.item()\n",
                                      f"        loss_sum += summed.item() / {MB_TOKENS} * total / {K}\n")],
                                r"returned the loss .* that is the mean of the micro-batch means"),
    # exercise 12
    "L2 instead of decoupled": (12, [(DECAY, "        g = g + weight_decay * p\n")],
                                r"added to the GRADIENT: that is Adam with an L2 penalty"),
    "L2 written into the gradient": (12, [(DECAY, "        g += weight_decay * p\n")],
                                     r"changed grads\[0\].*read only"),
    "decay without lr": (12, [("p *= 1 - lr * weight_decay", "p *= 1 - weight_decay")],
                         r"multiplied by 1 - weight_decay = 0\.9;.*1 - lr \* weight_decay = 0\.999"),
    "decay after the update": (12, [(DECAY, ""), (UPDATE, UPDATE + "        p *= 1 - lr * weight_decay\n")],
                               r"decay was applied AFTER the Adam update"),
    "no bias correction": (12, [(BIAS, "bias1, bias2 = 1.0, 1.0")],
                           r"step 1 of 5.*3\.1\d times AdamW's.*no bias correction.*3\.16 times"),
    "no bias correction of v": (12, [(BIAS, "bias1, bias2 = 1 - b1 ** step, 1.0")],
                                r"m is bias-corrected but v is not.*31\.6 at step 1"),
    "eps inside the sqrt": (12, [(UPDATE, "        p -= (lr / bias1) * m / np.sqrt(v / bias2 + eps)\n")],
                            r"params\[1\].*eps is INSIDE the square root"),
    "eps before the correction": (12, [(UPDATE, "        p -= lr * math.sqrt(bias2) / bias1 * m / (np.sqrt(v) + eps)\n")],
                                  r"eps was added to sqrt\(v\) BEFORE v's bias correction"),
    "not in place": (12, [(DECAY, "        p = p * (1 - lr * weight_decay)\n"), (UPDATE, UPDATE.replace("p -= ", "p = p - "))],
                     r"left every parameter unchanged: update them IN PLACE"),
    "new arrays put in the list": (12, [("    for p, g, s in zip(params, grads, state):\n",
                                         "    for i, (p, g, s) in enumerate(zip(params, grads, state)):\n"),
                                        (UPDATE, UPDATE.replace("p -= ", "p = params[i] = p - "))],
                                   r"put a new array in params\[0\]; the model holds the old one"),
    "update not in place": (12, [(UPDATE, UPDATE.replace("p -= ", "p = p - "))],
                            r"Only the weight decay reached the parameters"),
    "state not kept": (12, [("        m *= b1\n        m += (1 - b1) * g\n", "        m = b1 * m + (1 - b1) * g\n")],
                       r"state\[0\]\['exp_avg'\] \(m\) is still all zeros"),
    "betas hard-coded": (12, [("b1, b2 = betas", "b1, b2 = 0.9, 0.999")],
                         r"exp_avg.*differs.*come from the arguments"),
}

RIGHT = {
    "divide, not multiply": (11, [("(summed * (1.0 / total))", "(summed / total)")]),
    "micro-batches that own their memory": (
        11, [('"""\n\nEXPLAIN', '"""\nimport minigrad as mg\n\nEXPLAIN'),
             ("model(x[i:i + micro_batch_size])", "model(mg.tensor(x.numpy()[i:i + micro_batch_size]))")]),
    "counting with tensor ops, a Tensor loss": (11, [(COUNT, "(y != ignore_index).sum().item()"),
                                                      ("loss_sum += summed.item()", "loss_sum = summed.detach() + loss_sum")]),
    "zero_grad(set_to_none=False)": (11, [("model.zero_grad()", "model.zero_grad(set_to_none=False)")]),
    "empty micro-batches skipped": (11, [("        summed = loss_sum_fn(", "        if (y[i:i + micro_batch_size] != "
                                          "ignore_index).sum().item() == 0:\n            continue\n        summed = "
                                          "loss_sum_fn(")]),
    "m_hat and v_hat spelled out": (12, [(UPDATE, "        p -= lr * (m / bias1) / (np.sqrt(v / bias2) + eps)\n")]),
    "new state arrays stored back": (12, [("        m *= b1\n        m += (1 - b1) * g\n",
                                           "        m = s['exp_avg'] = b1 * m + (1 - b1) * g\n")]),
}


def _grade(tmp_path, number, edits):
    course = str(tmp_path / "exercises")
    shutil.copytree(grading.COURSE, course)
    exercise = next(e for e in grading.exercises(course) if e.number == number)
    text = open(os.path.join(os.path.dirname(grading.COURSE), ACC if number == 11 else ADAM)).read()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    open(exercise.path, "w").write(text)
    return grading.grade(exercise)


@pytest.mark.parametrize("case", WRONG, ids=list(WRONG))
def test_a_wrong_answer_is_explained(tmp_path, case):
    number, edits, message = WRONG[case]
    result = _grade(tmp_path, number, edits)
    assert result.status == "failing", (result.status, result.message)
    assert re.search(message, result.message, re.S), result.message


@pytest.mark.parametrize("case", RIGHT, ids=list(RIGHT))
def test_a_right_answer_written_another_way_passes(tmp_path, case):
    number, edits = RIGHT[case]
    result = _grade(tmp_path, number, edits)
    assert result.status == "done", result.message

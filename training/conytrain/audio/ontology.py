"""YAMNet's 521 AudioSet classes grouped into the default audio model's six classes, by the
classes' definitions in models/audio/MODEL.md (written from YAMNet's class names, before any
validation or test figure of a model using it existed: models/audio/EXPERIMENTS.md, rule 21).

A class of YAMNet that none of the six definitions names (laughter, coughs, acoustic
environments, "Sound effect", television, ...) is in no group. A group's feature for a token
is the largest YAMNet score (sigmoid) among its classes: AudioSet's parent and child classes
fire together, so a sum would favour the groups with the most classes.
"""

# (first, last) index ranges of models/yamnet/labels.csv, inclusive
GROUPS = {
    # people talking: speech, conversation, narration, babbling, a synthesiser, shouting,
    # whispering
    "speech": [(0, 12)],
    # music of any kind: singing, instruments, genres, moods; not the bells (alarm), jingle
    # bells, chimes and tuning forks (none)
    "music": [(24, 31), (132, 194), (203, 276)],
    # machines, engines, vehicles, traffic, crowds, water, fire, wind, rain, hiss, household
    # appliances and tools, footsteps and hands; steady tones and mains hum
    "noise": [(46, 48), (56, 58), (61, 66), (277, 301), (305, 311), (315, 315), (320, 323),
              (326, 348), (351, 381), (398, 450), (452, 455), (459, 474), (478, 488),
              (490, 491), (493, 493), (495, 495), (507, 511), (513, 517)],
    # beeps, sirens, bells, phones ringing, alarm clocks, horns, doorbells, whistles
    "alarm": [(195, 196), (198, 198), (202, 202), (302, 304), (312, 313), (316, 319),
              (324, 325), (349, 350), (382, 385), (389, 397), (475, 475)],
    # animal calls: birds, mammals, insects, frogs (not the cowbell)
    "animal": [(67, 86), (88, 131)],
    # YAMNet's own "Silence"
    "silence": [(494, 494)],
}


def group_rows(labels):
    """For each of the classifier's labels (each must be a group), its YAMNet class indices
    in index order."""
    unknown = [label for label in labels if label not in GROUPS]
    if unknown:
        raise ValueError(f"ontology: no YAMNet group for the labels {unknown}")
    rows = [[j for first, last in GROUPS[label] for j in range(first, last + 1)]
            for label in labels]
    flat = [j for g in rows for j in g]
    if len(set(flat)) != len(flat):
        raise ValueError("ontology: a YAMNet class is in two groups")
    return rows


def input_groups(fc, labels):
    """(sizes, W, b) of the classifier's input_groups stage (ref/model.py InputGroups) from
    YAMNet's fc layer fc = (W (521, 1024), b (521,)): the rows of each label's group, group
    by group in label order."""
    W, b = fc
    rows = group_rows(labels)
    flat = [j for g in rows for j in g]
    return [len(g) for g in rows], W[flat], b[flat]

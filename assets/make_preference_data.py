"""The real model's DPO demo set, ``demo_dpo_concise``: a plain answer chosen over the same answer wrapped in filler
(a property SmolLM2-135M-Instruct's base does not prefer, and DPO's margin shows it learning). Deterministic: written
by ``make_demo_data.py`` beside the other demo sets; the output is committed."""

from __future__ import annotations

INTROS = [
    "Well, that is a really great question, and there is a lot that could be said about it before "
    "getting to the point.",
    "Thank you so much for asking! Before I answer, let me take a moment to think about all the "
    "different aspects of this.",
    "Oh, what an interesting thing to wonder about! Many people have asked this over the years, and it "
    "deserves some care.",
    "Let me think about this carefully, step by step, because it is important to consider the question "
    "from every angle.",
]
OUTROS = [
    "I hope this long explanation helps, and please let me know if you would like me to go into even more detail!",
    "Of course, there is always more to learn, so feel free to ask me anything else you are curious about.",
]
# (question, answer[, the answer as it reads inside a sentence])
QA = [
    ("What is the capital of France?", "Paris"),
    ("What is the capital of Japan?", "Tokyo"),
    ("What is the capital of Italy?", "Rome"),
    ("What is the capital of Canada?", "Ottawa"),
    ("What is the capital of Egypt?", "Cairo"),
    ("What is the capital of Spain?", "Madrid"),
    ("What is the capital of Germany?", "Berlin"),
    ("What is the capital of Kenya?", "Nairobi"),
    ("What colour is the sky on a clear day?", "Blue", "blue"),
    ("What colour are ripe bananas?", "Yellow", "yellow"),
    ("What colour is fresh grass?", "Green", "green"),
    ("What colour is snow?", "White", "white"),
    ("How many days are in a week?", "Seven", "seven"),
    ("How many legs does a spider have?", "Eight", "eight"),
    ("How many months are in a year?", "Twelve", "twelve"),
    ("How many hours are in a day?", "Twenty-four", "twenty-four"),
    ("How many sides does a triangle have?", "Three", "three"),
    ("How many minutes are in an hour?", "Sixty", "sixty"),
    ("What do bees make?", "Honey", "honey"),
    ("What gas do plants take in?", "Carbon dioxide", "carbon dioxide"),
    ("What is frozen water called?", "Ice", "ice"),
    ("Which planet is closest to the Sun?", "Mercury"),
    ("Which planet is known as the Red Planet?", "Mars"),
    ("What is the largest ocean on Earth?", "The Pacific Ocean"),
    ("What is the tallest mountain on Earth?", "Mount Everest"),
    ("Who wrote Romeo and Juliet?", "William Shakespeare"),
    ("What is the opposite of hot?", "Cold", "cold"),
    ("What is the opposite of up?", "Down", "down"),
    ("What animal says moo?", "A cow"),
    ("What animal barks?", "A dog"),
    ("What is the boiling point of water in Celsius?", "100 degrees"),
    ("What do you call a baby cat?", "A kitten"),
    ("What do you call a baby dog?", "A puppy"),
    ("What is the first letter of the English alphabet?", "A"),
    ("What shape has four equal sides?", "A square"),
    ("What do cows drink?", "Water", "water"),
    ("What is two plus two?", "Four", "four"),
    ("What is ten minus three?", "Seven", "seven"),
    ("What is five times two?", "Ten", "ten"),
    ("Which season comes after winter?", "Spring", "spring"),
    ("Which season comes after summer?", "Autumn", "autumn"),
    ("What is the main language of Brazil?", "Portuguese"),
    ("What metal is a wedding ring often made of?", "Gold", "gold"),
    ("What organ pumps blood?", "The heart"),
    ("What do we breathe in to live?", "Oxygen", "oxygen"),
    ("Which is the largest planet?", "Jupiter"),
    ("What is the freezing point of water in Celsius?", "0 degrees"),
    ("How many wheels does a bicycle have?", "Two", "two"),
]


def concise_rows() -> list[dict]:
    rows = []
    for i, (question, answer, *inner) in enumerate(QA):
        middle = inner[0] if inner else answer
        rejected = f"{INTROS[i % len(INTROS)]} After thinking it over, I would say the answer is {middle}. "
        rejected += OUTROS[i % len(OUTROS)]
        rows.append({"instruction": question, "input": "", "chosen": f"{answer}.", "rejected": rejected})
    return rows

"""Word lists for the generated demo corpus. Everything here is invented for dense-pt (no external
text): fictional people, towns, rivers and creatures. Each attribute comes with the wording the
passages use and a paraphrase the queries use, so that exact word overlap is not enough."""

from __future__ import annotations

NAME_START = ["Ar", "Bel", "Cor", "Dav", "El", "Fen", "Gar", "Hal", "Is", "Jor", "Kel", "Lin", "Mor", "Nor", "Or",
              "Per", "Quin", "Ros", "Sel", "Tam", "Ul", "Ven", "Wil", "Yor", "Zan"]  # fmt: skip
NAME_END = ["a", "en", "is", "o", "wyn", "ric", "elle", "an", "ia", "us", "ette", "ard"]
SURNAME_START = ["Ash", "Birch", "Cold", "Dun", "East", "Flint", "Grey", "Holl", "Iron", "Kettle", "Long", "Marsh",
                 "North", "Oak", "Pike", "Quarry", "Reed", "Stone", "Thorn", "Under", "Vale", "West", "Yarrow"]  # fmt: skip
SURNAME_END = ["wick", "ford", "by", "ley", "ton", "more", "field", "worth", "combe", "dale"]

PROFESSIONS = [
    # (as written in passages, paraphrase for queries)
    ("glassblower", "glass maker"),
    ("clockmaker", "watch maker"),
    ("blacksmith", "metal worker at the forge"),
    ("weaver", "cloth maker"),
    ("potter", "ceramics maker"),
    ("carpenter", "woodworker"),
    ("miller", "grain grinder"),
    ("shipwright", "boat builder"),
    ("astronomer", "stargazer"),
    ("apothecary", "medicine maker"),
]

# Inventions: an adjective (passage wording, query paraphrase) times a device (passage, paraphrase).
INVENTION_ADJ = [
    ("tilting", "that tips to one side"),
    ("folding", "that can be folded flat"),
    ("floating", "that floats on water"),
    ("humming", "that makes a low buzzing sound"),
    ("spinning", "that turns round and round"),
    ("glowing", "that gives off light"),
    ("rolling", "on wheels"),
    ("whistling", "that whistles"),
    ("steam-driven", "powered by steam"),
    ("clockwork", "driven by springs and gears"),
    ("sun-powered", "running on sunlight"),
    ("wind-driven", "turned by the breeze"),
    ("self-cleaning", "that cleans itself"),
    ("two-handed", "worked with both hands"),
]
INVENTION_NOUN = [
    ("kiln", "oven for firing clay"),
    ("loom", "weaving frame"),
    ("lantern", "lamp"),
    ("compass", "direction finder"),
    ("telescope", "spyglass"),
    ("plough", "tool for turning soil"),
    ("barometer", "weather glass"),
    ("bellows", "air pump for a fire"),
    ("printing press", "machine for printing pages"),
    ("water pump", "device for lifting water"),
    ("music box", "little box that plays tunes"),
    ("sundial", "shadow clock"),
    ("butter churn", "butter maker"),
    ("spinning wheel", "yarn wheel"),
]
MATERIALS = [
    ("brass", "a yellow alloy of copper and zinc"),
    ("oak", "hard timber from an acorn tree"),
    ("iron", "forged metal"),
    ("willow", "bendy riverside wood"),
    ("bronze", "an alloy of copper and tin"),
    ("pine", "soft evergreen wood"),
    ("copper", "reddish metal"),
    ("walnut", "dark nut-tree wood"),
]
PURPOSES = [
    "made long winter evenings easier",
    "was copied by workshops across the region",
    "won a prize at the spring fair",
    "was later improved by the inventor's apprentices",
    "is still shown in the town museum",
    "saved many hours of hard labour",
]

TOWN_START = ["Tarn", "Brack", "Elm", "Gull", "Hollow", "Kings", "Lark", "Mill", "Nettle", "Otter", "Pebble",
              "Raven", "Salt", "Thistle", "Wren", "Amber", "Copper", "Fern", "Heron", "Moss"]  # fmt: skip
TOWN_END = ["wick", "ford", "mere", "stead", "holm", "bury", "gate", "haven", "brook", "cross"]
RIVERS = ["Varn", "Ossel", "Brede", "Kell", "Mure", "Tamsin", "Lode", "Ysgar"]
REGIONS = [("northern", "in the north"), ("southern", "in the south"), ("eastern", "in the east"),
           ("western", "in the west")]  # fmt: skip
PRODUCTS = [
    ("pear cider", "a drink made from fermented pears"),
    ("woollen blankets", "blankets woven from sheep's fleece"),
    ("blue pottery", "ceramics glazed the colour of the sky"),
    ("smoked eels", "eels cured over a wood fire"),
    ("church bells", "large cast bells for steeples"),
    ("honey cakes", "sweet bakes made with honey"),
    ("rope", "twisted cord for ships"),
    ("goat cheese", "cheese from goat milk"),
    ("slate roofing", "flat grey stone tiles for roofs"),
    ("wooden toys", "carved playthings for children"),
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
TOWN_SIZE = ["small", "busy", "quiet", "walled", "hilltop", "riverside"]

CREATURE_PREFIX = ["glimmer", "thorn", "mist", "ember", "frost", "dusk", "moss", "pebble", "reed", "sun", "storm",
                   "ash", "briar", "cinder", "dew"]  # fmt: skip
CREATURE_SUFFIX = [("fox", "mammal"), ("wing", "bird"), ("newt", "amphibian"), ("finch", "bird"),
                   ("hare", "mammal"), ("toad", "amphibian"), ("moth", "insect"), ("beetle", "insect"),
                   ("shrew", "mammal"), ("carp", "fish")]  # fmt: skip
CLASS_PARAPHRASE = {
    "mammal": "furry animal",
    "bird": "feathered creature",
    "amphibian": "creature that lives on land and in water",
    "insect": "six-legged creature",
    "fish": "creature with fins and gills",
}
HABITATS = [
    ("reed beds", "marshy reeds"),
    ("pine forests", "evergreen woods"),
    ("sea cliffs", "rocky coast"),
    ("mountain meadows", "high grassland"),
    ("desert dunes", "sandy wastes"),
    ("river caves", "underground streams"),
    ("old orchards", "fruit tree groves"),
]
FOODS = [
    ("beetles", "small hard-shelled bugs"),
    ("berries", "small soft fruits"),
    ("seeds", "grains and kernels"),
    ("snails", "slow shelled molluscs"),
    ("nectar", "the sugary juice of flowers"),
    ("mushrooms", "fungi"),
    ("water weed", "plants growing under water"),
]
COLORS = [("crimson", "deep red"), ("silver", "grey metallic"), ("golden", "yellow"), ("violet", "purple"),
          ("black", "dark"), ("white", "snowy"), ("green", "leafy-coloured")]  # fmt: skip
BODY_PARTS = [("tail", "tail"), ("crest", "head feathers or crest"), ("stripes", "markings"),
              ("eyes", "eyes"), ("spots", "speckles")]  # fmt: skip

"""Self-written source text for the chat split (CC0-1.0, written for cellbench).

Everything here was written for this project: no sentence is taken from a dataset, a book or a
web page. `build_splits.py` composes prompts from these pieces with a seeded RNG; the pieces are
chosen to give the text the shape of what people send to chat models (questions, articles to
summarise, meeting minutes, reviews, code), not to be authoritative about their topics.

Size: the chat split's source text itself, data rather than logic: nothing in it to split by.
"""

from __future__ import annotations

# Short single-turn requests that want a brief answer (max_tokens 64).
SHORT_FACTUAL: tuple[str, ...] = (
    "What is the boiling point of water at the top of a 3,000 metre mountain, roughly?",
    "Name three metals that are liquid at or near room temperature.",
    "In one sentence, what does a load balancer do?",
    "Is a tomato a fruit or a vegetable? Answer briefly.",
    "How many bits are in a byte, and why that number?",
    "What is the difference between weather and climate? Two sentences.",
    "Convert 72 degrees Fahrenheit to Celsius and show the formula.",
    "Which planet has the shortest day in our solar system?",
    "What does the HTTP status code 429 mean?",
    "Give me a synonym for 'meticulous' that a ten-year-old would know.",
    "Why do onions make people cry? Keep it short.",
    "What is the capital of Canada, and when did it become the capital?",
    "In Python, what is the difference between a list and a tuple?",
    "How long should a soft-boiled egg cook?",
    "What is a prime number? Give the first five.",
    "Why is the sky darker at the zenith than near the horizon at sunset?",
    "What does 'idempotent' mean for an API request?",
    "Which is heavier, a litre of water or a litre of olive oil?",
)

# Short requests that invite a longer, open-ended answer (max_tokens 256).
SHORT_OPEN: tuple[str, ...] = (
    "Write a short poem about a lighthouse keeper's last night on duty.",
    "Explain recursion to someone who has never programmed.",
    "Suggest a three-day itinerary for a rainy weekend in a small coastal town.",
    "Draft a friendly note asking my neighbour to trim their hedge.",
    "What are the pros and cons of working a four-day week?",
    "Tell me a bedtime story about a fox who is afraid of the dark.",
    "How would you explain inflation to a teenager with a part-time job?",
    "Write a limerick about a cat that learned to use the keyboard.",
    "Give me five ideas for a science fair project using only kitchen items.",
    "Describe the smell of rain to someone who has never experienced it.",
    "What should I pack for a two-week hiking trip in the mountains?",
    "Write the opening paragraph of a mystery novel set in a train station.",
    "Plan a vegetarian dinner menu for six guests, one of whom is allergic to nuts.",
    "Explain how a bill becomes law, in plain language.",
    "Help me write a toast for my sister's wedding; she loves sailing.",
)

# Topic essays: a title and four paragraphs each. Long chat prompts are digests of these.
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("The Patience of Sourdough", (
        "Sourdough bread begins with a starter, a paste of flour and water that has been left to "
        "collect wild yeasts and lactic acid bacteria from the air, the flour and the baker's hands. "
        "For the first week the mixture smells sharp and sometimes unpleasant, and many beginners give "
        "up at exactly this point. If the starter is fed every day, discarding half and adding fresh "
        "flour and water, the population settles into a stable community that rises predictably and "
        "smells of yoghurt and green apples.",
        "The dough itself is mostly time. A typical loaf mixes flour, water, salt and a spoonful of "
        "active starter, then rests for several hours while the baker folds it every half hour to "
        "build strength. Unlike kneading, folding does not tire the arms: the gluten network forms on "
        "its own as the flour hydrates, and the folds simply line it up. By the end of the bulk rise "
        "the dough should have grown by about half and feel airy and domed at the edges.",
        "Shaping and proofing decide the crumb. A tight shape traps gas and gives an open, glossy "
        "interior; a loose one spreads in the oven and bakes flat. Many bakers proof the shaped loaf "
        "overnight in the refrigerator, which slows the yeast more than the bacteria, so the bread "
        "gains sourness while the baker sleeps. The cold dough is also far easier to score cleanly "
        "with a razor before it goes into the oven.",
        "Baking inside a preheated cast-iron pot imitates the steam-injected ovens of professional "
        "bakeries. The lid keeps moisture around the loaf for the first twenty minutes, so the crust "
        "stays soft long enough for the bread to expand fully. With the lid removed, the surface dries "
        "and browns, and the sugars released by long fermentation caramelise into a deep, crackling "
        "crust. The hardest step comes last: letting the loaf cool for an hour before cutting it.",
    )),
    ("Bees on the Rooftops", (
        "City beekeeping has grown quickly over the past two decades, and hives now sit on hotel "
        "roofs, office terraces and allotments in most large towns. Urban bees often do surprisingly "
        "well. Parks, street trees, window boxes and private gardens offer a long succession of "
        "flowers, and cities are usually a few degrees warmer than the surrounding countryside, which "
        "lengthens the foraging season at both ends of the year.",
        "The success has a cost that is easy to overlook. A strong colony of honey bees can number "
        "fifty thousand workers in summer, and each of them visits flowers that wild bees also depend "
        "on. Ecologists in several cities have reported that when hive density rises above a certain "
        "level, solitary bees and bumblebees find less nectar and pollen. Some councils now ask new "
        "beekeepers to register their hives so that density can at least be measured.",
        "For the beekeeper, the work follows the calendar. Spring inspections look for a laying queen "
        "and enough stores to bridge the gap before the main flow. Early summer is swarm season, when "
        "a crowded colony raises new queens and half of the bees leave with the old one. Late summer "
        "is for harvesting and for treating the colony against varroa mites, the parasite that has "
        "done more damage to honey bees than any other single cause.",
        "Anyone thinking of starting should spend a season helping an experienced keeper first. "
        "Local associations run courses, lend equipment and often have a waiting list of members "
        "willing to take on a mentee. A good mentor teaches the quiet skills that books cannot: "
        "reading the mood of a colony from the sound it makes when the lid comes off, and knowing "
        "when to close the hive and come back another day.",
    )),
    ("How a Heat Pump Moves Warmth", (
        "A heat pump does not make heat so much as move it. Outside air, even on a cold day, holds "
        "thermal energy, and a heat pump uses a refrigerant loop to collect some of it and release it "
        "indoors. The refrigerant evaporates at a very low temperature in the outdoor coil, absorbing "
        "energy as it turns to gas. A compressor then squeezes the gas, raising its temperature well "
        "above that of the room.",
        "Inside, the hot gas passes through a second coil, where it condenses back to a liquid and "
        "gives up its heat to the air or to the water in a radiator circuit. An expansion valve drops "
        "the pressure again and the cycle repeats. The only energy bought from the grid is the "
        "electricity that drives the compressor and the fans, which is why a heat pump can deliver "
        "three or four units of heat for every unit of electricity it uses.",
        "That ratio, the coefficient of performance, falls as the temperature gap between outside and "
        "inside grows. On a mild day a modern unit might exceed four; on a freezing night it might "
        "drop towards two. Houses with large radiators or underfloor heating can run their heating "
        "water cooler, which keeps the gap small and the efficiency high. Small radiators designed for "
        "a gas boiler often need replacing when a heat pump goes in.",
        "Noise and placement are the most common practical worries. The outdoor unit contains a fan "
        "and a compressor, and although recent models are quieter than a conversation, they still "
        "need a spot with free airflow and some distance from a neighbour's bedroom window. In very "
        "cold weather the outdoor coil can frost over, and the unit briefly reverses its cycle to melt "
        "the ice, which is normal and usually lasts only a few minutes.",
    )),
    ("The Moon and the Tides", (
        "Twice a day the sea rises up the beach and falls away again, and the timing drifts about fifty "
        "minutes later each day. The cause is the Moon's gravity, which pulls slightly harder on the "
        "side of the Earth that faces it than on the Earth's centre, and slightly less on the far side. "
        "The difference stretches the oceans into two bulges, one towards the Moon and one away from "
        "it, and the Earth turns underneath both.",
        "The Sun raises tides as well, a little under half as strong as the Moon's. When Sun, Moon and "
        "Earth line up, at new moon and full moon, the two effects add together and produce spring "
        "tides, with the highest highs and the lowest lows. At the quarter moons the pulls work at "
        "right angles and partly cancel, giving the gentler neap tides. The name spring has nothing to "
        "do with the season; it comes from the sense of the water springing up.",
        "Real coastlines complicate the neat picture. Basins and bays have their own natural periods "
        "of oscillation, like water sloshing in a bath, and when that period is close to the tidal "
        "rhythm the range grows enormously. Some northern bays see differences of more than fifteen "
        "metres between high and low water, while parts of enclosed seas barely notice the tide at "
        "all. Local tide tables therefore rely on long records of measurements, not on theory alone.",
        "Tides also slow the Earth down. Friction between the moving water and the sea floor turns a "
        "tiny part of the planet's spin into heat, lengthening the day by a couple of milliseconds per "
        "century. The angular momentum does not vanish: it is passed to the Moon, which drifts a few "
        "centimetres further away each year. Laser reflectors left on the lunar surface let observers "
        "measure that retreat directly.",
    )),
    ("Two Wheels and a Chain", (
        "The first machines that could be called bicycles had no pedals at all. Riders sat astride a "
        "wooden frame and pushed along the road with their feet, gliding between strides. Cranks "
        "attached directly to the front wheel came later, and because each turn of the pedals moved "
        "the bicycle only one circumference of that wheel, makers built front wheels larger and larger "
        "to go faster, until riders perched high above the road.",
        "Those tall machines were fast but dangerous, and a fall from the top often meant a headfirst "
        "landing. The design that replaced them put two wheels of equal size under a diamond-shaped "
        "frame and drove the rear wheel with a chain. Gearing the chain let a small wheel travel as "
        "far per pedal stroke as a giant one, and the rider sat low enough to put a foot down. Air-"
        "filled tyres, arriving at about the same time, softened the ride over rough streets.",
        "The effect on ordinary life was large. A bicycle cost far less than a horse and needed no "
        "stable or feed, so workers could live further from factories and families could visit "
        "relatives in the next town. Women in particular took up cycling in great numbers, and the "
        "demand for clothing that allowed it fed arguments about dress and independence that were "
        "already under way.",
        "Many later technologies passed through bicycle workshops. Ball bearings, tension-spoked "
        "wheels, and precise steel tubing were all refined for bicycles before they spread to cars "
        "and aircraft. Several early aviation pioneers ran bicycle shops, and the habits of careful, "
        "lightweight construction that the trade demanded carried over into the first flying "
        "machines.",
    )),
    ("A Compost Heap That Works", (
        "Compost is what happens when microorganisms, fungi and small animals break down plant "
        "material into a dark, crumbly soil improver. A heap needs four things: a mix of green "
        "material rich in nitrogen, such as grass clippings and vegetable peelings, brown material "
        "rich in carbon, such as dry leaves and cardboard, enough moisture to feel like a wrung-out "
        "sponge, and air. Too much green makes a slimy, smelly heap; too much brown makes one that "
        "never seems to change.",
        "A large heap that is built all at once can heat up to sixty degrees or more within a few days "
        "as bacteria multiply. That heat kills many weed seeds and disease organisms, and turning the "
        "heap every week or two brings fresh air to the centre and restarts the process. Most home "
        "heaps are built gradually instead, a bucket at a time, and stay cool. They still work, only "
        "more slowly, taking a year or so rather than a couple of months.",
        "Some things are better left out. Cooked food, meat and dairy attract rats and foxes, and "
        "diseased plants or perennial weed roots can survive a cool heap and return to the garden. "
        "Glossy printed paper and most so-called biodegradable plastics break down poorly at home "
        "temperatures. Eggshells, coffee grounds, tea leaves and shredded paper are all welcome.",
        "Finished compost smells of a forest floor and no longer shows what it was made from. It can "
        "be spread as a mulch around shrubs, dug into vegetable beds, or sieved and mixed with sand "
        "for potting. Gardeners who compost steadily tend to find that their soil grows darker and "
        "easier to dig over the years, and that it holds water better through dry summers.",
    )),
    ("Why Indexes Make Queries Fast", (
        "Without an index, a database that is asked for one customer's orders has to read every row "
        "of the orders table and test each one. For a table of a few thousand rows that is harmless; "
        "for a table of a few hundred million it means reading gigabytes from disk for every request. "
        "An index is a separate, sorted structure that maps values of one or more columns to the "
        "locations of the matching rows, so the database can jump straight to them.",
        "Most relational databases store indexes as B-trees. Each node of the tree holds many keys "
        "in order and pointers to child nodes, so the tree stays shallow: three or four levels can "
        "cover millions of rows. Finding a key means reading one node per level, and because the "
        "leaves are kept in order, range queries such as all orders from last week can walk along "
        "the leaves without returning to the root.",
        "Indexes are not free. Every insert, update or delete must change the table and every index "
        "that covers the changed columns, and each index takes disk space and memory. A table with a "
        "dozen indexes can write several times more slowly than one with two. The column order in a "
        "composite index matters too: an index on customer and date helps a query that filters by "
        "customer, but not one that filters only by date.",
        "The practical way to decide is to measure. Query planners will explain which plan they chose "
        "for a statement and how many rows they expected at each step. When the estimate and the "
        "actual count differ by orders of magnitude, statistics are often stale, and refreshing them "
        "fixes the plan without any new index. Adding indexes for the handful of queries that "
        "dominate the workload usually brings most of the benefit.",
    )),
    ("Learning a Language After Thirty", (
        "Adults often say they are too old to learn a new language, but studies of adult learners "
        "tell a more hopeful story. Adults learn vocabulary and grammar faster than children in the "
        "first months, because they can use explanations, analogies and deliberate practice. Where "
        "children keep an advantage is accent: people who start young are much more likely to sound "
        "like native speakers. For most purposes, being clearly understood matters far more.",
        "The biggest predictor of progress is time spent with the language in use. Listening to "
        "podcasts and radio aimed at native speakers, even before they are fully understood, trains "
        "the ear to split a stream of sound into words. Reading graded books lets learners meet the "
        "same common words many times in different sentences, which fixes them in memory better than "
        "lists ever do.",
        "Speaking is where many adults stall, usually from embarrassment rather than lack of ability. "
        "Conversation exchanges, where two people each practise the other's language for half an hour, "
        "lower the stakes because both sides make mistakes. Tutors can help too, especially ones who "
        "let the learner talk most of the time and note recurring errors instead of correcting every "
        "sentence as it happens.",
        "Spaced repetition software is useful for the long tail of vocabulary, showing each card just "
        "before it would be forgotten. It works best for words the learner has already met in "
        "context; memorising isolated words from a frequency list tends to produce a vocabulary that "
        "is recognised on a screen and forgotten in conversation. Fifteen minutes a day, kept up for "
        "a year, beats an intense month followed by nothing.",
    )),
    ("First Nights Under the Stars", (
        "Stargazing needs less equipment than most beginners expect. A dark site, a reclining chair, "
        "warm clothes and twenty minutes for the eyes to adapt reveal thousands of stars, the band of "
        "the Milky Way, and often a satellite or two crossing the sky. A red torch preserves night "
        "vision while reading a chart, because the rods in the eye that handle dim light are hardly "
        "sensitive to red.",
        "Binoculars are the best first instrument. A pair with a magnification of seven to ten and "
        "fifty millimetre lenses shows the moons of Jupiter as tiny points beside the planet, the "
        "craters along the edge of the lit part of the Moon, and star clusters that look like a "
        "smudge to the naked eye. They are light, quick to set up, and useful in daytime too, which "
        "cannot be said of a telescope.",
        "Learning the sky is a matter of a few signposts. Bright, easily recognised patterns point "
        "to fainter neighbours, and once a handful are familiar the rest can be found by hopping "
        "from one to the next. Phone apps that overlay constellation names on the camera view help at "
        "first, but their bright screens spoil dark adaptation, so it is worth switching to a printed "
        "chart once the basics are learned.",
        "Planning around the Moon matters more than the weather forecast suggests. A full Moon washes "
        "out all but the brightest objects, while the week around new Moon gives the darkest skies. "
        "Clear nights after rain are often the best, because the air has been washed of dust. Local "
        "astronomy clubs hold public evenings where members share views through larger telescopes "
        "and explain what is worth seeing that month.",
    )),
    ("The Library Gets a New Roof", (
        "After three winters of buckets under the skylights, the small public library on Mill Street "
        "is finally getting a new roof. The town council approved the repair at its spring meeting, "
        "choosing a design that keeps the original slate on the street side and replaces the leaking "
        "flat section at the back with an insulated membrane. Work is expected to take eleven weeks, "
        "during which the building will close for two short periods.",
        "The library's collection will not disappear during the closures. Volunteers plan to run a "
        "temporary lending desk in the community hall across the road, stocked with the most borrowed "
        "titles, children's books and a shelf of large-print novels. Returns can still be made through "
        "the book drop, which the contractor has agreed to keep clear of scaffolding, and the online "
        "catalogue will show which items are available at the hall.",
        "Staff hope the repair will also help the building's energy bills. The old flat roof had "
        "almost no insulation, and the reading room was so cold in January that story time moved "
        "upstairs. The new membrane includes a thick layer of insulation, and the skylights will be "
        "replaced with double-glazed units that let in the same light. A survey found the walls are "
        "in good condition and need only repointing in a few places.",
        "Residents raised most of the money for the library's new furniture through a series of book "
        "sales, quiz nights and a sponsored walk around the reservoir. The chair of the friends' "
        "group said the roof was the part nobody could fund with cake sales, and thanked the council "
        "for finding the money. A reopening event with readings by local authors is planned for the "
        "first Saturday after the work finishes.",
    )),
    ("Boxes That Move the World", (
        "Most of the goods in a typical shop have spent part of their journey inside a steel shipping "
        "container. The standard box, twenty or forty feet long, can be lifted from a ship by a crane, "
        "set on a truck or a rail wagon, and carried inland without anyone opening it. Before "
        "containers, cargo was loaded piece by piece by teams of dock workers, and a ship could spend "
        "longer in port than at sea.",
        "The largest container ships now carry more than twenty thousand standard boxes. Their size "
        "brings low costs per box but also strains ports, which need deeper channels, longer quays and "
        "taller cranes to handle them. When one of these ships is delayed, thousands of containers "
        "arrive at once, and the yards behind the quay fill up faster than trucks can clear them. "
        "Small disruptions can ripple through schedules for weeks.",
        "Empty containers are a hidden problem. Trade between regions is rarely balanced, so boxes "
        "pile up where imports exceed exports and run short where exporters need them. Shipping lines "
        "spend large sums moving empty containers back across oceans. During busy periods, the price "
        "of booking a box on a popular route can multiply within months because the boxes are in the "
        "wrong places.",
        "Tracking has improved a great deal. Many containers now carry sensors that report their "
        "position, temperature and whether the doors have been opened, which matters for medicines "
        "and food. Customs agencies use the data to choose which boxes to inspect, and shippers use it "
        "to tell customers when a delivery will really arrive. The box itself has changed very little "
        "in sixty years; the information around it has changed completely.",
    )),
    ("Caching Without Tears", (
        "A cache keeps a copy of data closer to where it is needed, so that repeated requests avoid "
        "slow work. Web services put caches in many places: in the browser, in a content delivery "
        "network at the edge, in memory inside the application, and in dedicated key-value stores in "
        "front of the database. Each layer trades freshness for speed, and the hard part is deciding "
        "how stale each kind of data may be.",
        "Expiry times are the simplest policy. A product page might be cached for five minutes, a "
        "user's profile for thirty seconds, and an exchange rate not at all. Explicit invalidation, "
        "deleting the cached copy when the source changes, gives fresher results but is easy to get "
        "wrong: every code path that writes the data must remember to invalidate, and messages that "
        "announce changes can arrive late or out of order.",
        "Caches can also fail in ways that take a whole service down. If a popular entry expires and "
        "a thousand requests arrive at the same moment, all of them may miss the cache and hit the "
        "database together. Common defences are to let one request rebuild the entry while the others "
        "wait or receive the old value, and to add a little randomness to expiry times so that entries "
        "created together do not all expire together.",
        "Measuring a cache means more than its hit ratio. A cache that answers ninety-nine per cent "
        "of requests can still be the problem if the remaining one per cent are the slowest queries, "
        "or if its memory use pushes other processes into swapping. Good dashboards show latency for "
        "hits and misses separately, eviction counts, and the age of entries when they are served.",
    )),
    ("Training for a First Marathon", (
        "Most first-time marathon plans last between sixteen and twenty weeks and assume the runner "
        "can already manage about thirty minutes of continuous running. The core of every plan is the "
        "weekly long run, which grows gradually from around ten kilometres to thirty or a little more, "
        "with an easier week every third or fourth week to let the body absorb the work.",
        "The long runs should feel slow. Running them at a pace where conversation is still possible "
        "builds the endurance that matters on race day while keeping injury risk low. Faster sessions "
        "have their place, usually once a week, but beginners who push every run tend to arrive at "
        "the start line tired or hurt. Rest days are part of the training, not a break from it.",
        "Fuelling needs rehearsal. Over the final part of a marathon the body runs short of stored "
        "carbohydrate, and most runners eat gels, sweets or drinks along the way to delay that point. "
        "The stomach has to learn to accept food while running, so long training runs are the place "
        "to try products and timings. Nothing new on race day is one of the oldest rules in the sport.",
        "In the last two or three weeks the training volume drops sharply, a period called the taper. "
        "Many runners find it unsettling, feeling restless or imagining aches that do not exist. The "
        "taper lets muscles repair and energy stores fill up. On the day itself, the most common "
        "mistake is starting too fast with the excitement of the crowd; an even pace, or a slightly "
        "faster second half, leads to the happiest finishes.",
    )),
    ("Reefs in Warm Water", (
        "Coral reefs are built by tiny animals called polyps, each a few millimetres across, that "
        "secrete skeletons of calcium carbonate. Over centuries, the skeletons accumulate into "
        "structures large enough to be seen from space. Most reef-building corals host microscopic "
        "algae inside their tissues, which photosynthesise and share sugars with the polyp in return "
        "for shelter and nutrients.",
        "That partnership is sensitive to temperature. When the water stays a degree or two above the "
        "usual summer maximum for several weeks, the algae start producing harmful compounds and the "
        "coral expels them. Without the algae, the coral's white skeleton shows through its clear "
        "tissue, which is why the event is called bleaching. Bleached coral is not dead, but it is "
        "starving, and if conditions do not improve it may die within weeks.",
        "Reefs cover a tiny fraction of the sea floor yet shelter a large share of marine species. "
        "They also protect coasts by breaking waves before they reach the shore, and they support "
        "fisheries and tourism that millions of people depend on. Pollution running off the land, "
        "overfishing of the grazing fish that keep algae in check, and physical damage from anchors "
        "all make it harder for reefs to recover from heat stress.",
        "Restoration projects grow coral fragments on underwater frames and replant them onto damaged "
        "reefs, and some are testing strains that tolerate heat better. These efforts can help small "
        "areas recover faster, but researchers involved in them are usually the first to say that "
        "restoration cannot keep pace with damage unless the warming itself slows. Protecting water "
        "quality and fish populations buys reefs time.",
    )),
)

# Questions asked after a single paragraph in medium-length prompts.
PARAGRAPH_QUESTIONS: tuple[str, ...] = (
    "What is the main point of the paragraph above, in one sentence?",
    "List the facts stated in this paragraph that could be checked independently.",
    "Rewrite the paragraph for a ten-year-old reader.",
    "What question would you ask the author after reading this?",
    "Turn this paragraph into three quiz questions with answers.",
    "Which sentence in the paragraph is the least convincing, and why?",
    "Give this paragraph a headline of at most eight words.",
    "Translate the key idea of this paragraph into a single tweet.",
)

# People, places and things for the procedurally composed documents.
FIRST_NAMES: tuple[str, ...] = (
    "Amara", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Gustavo", "Hana", "Idris", "Jonas",
    "Keiko", "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Samir", "Tamsin",
    "Ulla", "Viktor", "Wen", "Ximena", "Yusuf", "Zofia",
)
LAST_NAMES: tuple[str, ...] = (
    "Abbott", "Baptiste", "Castellanos", "Dimitrov", "Eriksen", "Fontaine", "Grünwald", "Haddad",
    "Ibarra", "Jovanovic", "Kowalczyk", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov",
    "Quinlan", "Rahman", "Sato", "Thorne", "Ueda", "Varga", "Whitfield", "Yilmaz", "Zeller",
)
TOWNS: tuple[str, ...] = (
    "Ashford Bay", "Brindlemere", "Caddon Falls", "Dunmore Quay", "Elmstead", "Fernhollow",
    "Glenharrow", "Hollins Cross", "Ivybridge Vale", "Kestrel Point", "Larchmont Ridge",
    "Marlow Sands", "Northwick", "Oakhaven", "Pellingford", "Redwater", "Saltcombe", "Thistledown",
)
COMPANIES: tuple[str, ...] = (
    "Brightwell Logistics", "Copperleaf Software", "Driftwood Outdoor", "Evergreen Dairy",
    "Foxglove Health", "Granite Peak Insurance", "Harbourline Ferries", "Juniper Analytics",
    "Lanternfish Games", "Meridian Tools", "Northstar Solar", "Orchard Lane Bakery",
)
PRODUCTS: tuple[tuple[str, str], ...] = (
    ("TrailLite 2 tent", "tent"), ("AquaPure kettle", "kettle"), ("Nimbus 14 laptop stand", "stand"),
    ("QuietStep running shoes", "shoes"), ("BrewMate grinder", "grinder"),
    ("ClearView monitor arm", "arm"), ("SnugFit winter gloves", "gloves"),
    ("PocketBeam torch", "torch"), ("GreenThumb plant lamp", "lamp"),
)

# Building blocks for meeting minutes.
MEETING_KINDS: tuple[str, ...] = (
    "Parish council", "Product steering group", "School governors", "Allotment society committee",
    "Platform team weekly sync", "Housing cooperative general meeting", "Festival planning group",
)
AGENDA_ITEMS: tuple[str, ...] = (
    "budget for the coming year", "the car park resurfacing", "volunteer rota for the summer",
    "migration of the billing service", "the noise complaints from the east side",
    "replacing the photocopier", "opening hours over the holidays", "the new accessibility audit",
    "sponsorship for the junior football team", "the on-call rotation", "tree planting along the canal",
    "renewing the insurance policy", "the website redesign", "a proposal to ban single-use cups",
)
DISCUSSION: tuple[str, ...] = (
    "{a} summarised the background and noted that the figures had changed since the last meeting.",
    "{a} asked whether the cost estimate included labour, and {b} confirmed that it did not.",
    "{b} reported that two suppliers had replied and a third had not responded despite reminders.",
    "Several members felt the timeline was too ambitious given the holiday period.",
    "{a} pointed out that the same issue had been raised last year and nothing had been done.",
    "{b} proposed a trial period of three months with a review at the end.",
    "There was a long discussion about who should own the work once it is finished.",
    "{a} shared a short survey of residents, most of whom supported the change.",
    "{b} warned that the contract requires ninety days' notice before any change.",
    "Members agreed the original proposal was sound but asked for a cheaper option as well.",
    "{a} noted that the figures in the paper used last quarter's prices.",
    "{b} offered to speak to the neighbouring group, which had faced the same problem.",
)
DECISIONS: tuple[str, ...] = (
    "Decision: approved, with {n} votes in favour and {m} abstentions.",
    "Decision: deferred to the next meeting pending a revised quote.",
    "Decision: {a} to proceed with the trial; review in three months.",
    "Decision: rejected for now; to be revisited when the budget is known.",
)
ACTIONS: tuple[str, ...] = (
    "Action: {a} to circulate the revised figures by {d}.",
    "Action: {b} to contact the suppliers again before {d}.",
    "Action: {a} and {b} to draft a short note for the newsletter by {d}.",
    "Action: {b} to book the hall for the follow-up session on {d}.",
)

# Building blocks for incident postmortems.
SERVICES: tuple[str, ...] = (
    "checkout-api", "search-indexer", "auth-gateway", "payments-worker", "image-resizer",
    "notifications", "inventory-sync", "reporting-db",
)
TIMELINE_EVENTS: tuple[str, ...] = (
    "Alert fired: p99 latency on {s} above 2 s for five minutes.",
    "{a} acknowledged the page and opened the incident channel.",
    "Error rate on {s} rose to {p}% of requests; most errors were upstream timeouts.",
    "{b} noticed that a deploy of {s} had finished eleven minutes before the first alert.",
    "Rollback of {s} started.",
    "Rollback completed; error rate unchanged, which ruled out the deploy.",
    "{a} found connection pool exhaustion in the {s} logs.",
    "Database CPU at 95%; a long-running report query was holding locks.",
    "{b} killed the report query; latency began to recover.",
    "Traffic shifted to the secondary region as a precaution.",
    "Customer support reported a spike in failed-payment tickets.",
    "Error rate back below 0.1%; monitoring continued.",
    "{a} declared the incident resolved and scheduled the review.",
    "Cache hit ratio on {s} dropped from 96% to 40% after a config reload.",
    "Disk on one {s} node reached 100%; the node was drained.",
)
INCIDENT_ANALYSIS: tuple[str, ...] = (
    "The root cause was a scheduled reporting job that ran against the primary database instead of "
    "the replica after a configuration change in the previous week. The change was reviewed, but the "
    "reviewer could not see that the replica host name had been removed from the shared settings file.",
    "Detection took longer than it should have because the latency alert used a five-minute window "
    "and the dashboards aggregated all regions together, hiding the affected one.",
    "The rollback was a reasonable first step, but it cost twelve minutes. The runbook now asks "
    "responders to check database load before rolling back a deploy that touched no queries.",
    "Connection pools in the services were sized for normal traffic with no headroom, so a small "
    "slowdown in the database quickly turned into queued requests and timeouts further up the stack.",
    "Communication with customers went well: the status page was updated within ten minutes and "
    "support had a prepared message. Internally, two teams worked on the same hypothesis without "
    "knowing it, because updates were posted in different channels.",
)

# Building blocks for travel journals.
DIARY_SENTENCES: tuple[str, ...] = (
    "We left {t} early, before the mist had lifted from the fields.",
    "The bus to {t} was an hour late, so we sat in the station café and watched the rain.",
    "Lunch was bread, cheese and tomatoes bought from a stall by the harbour in {t}.",
    "In the afternoon we walked the cliff path; the wind was strong enough to lean on.",
    "The guesthouse in {t} had creaking floors, a cat called Admiral, and the best porridge of the trip.",
    "A fisherman told us the weather would turn by evening, and he was right to the hour.",
    "We spent two hours in the little museum, mostly in a room full of old maps.",
    "My boots finally gave up; a shop in {t} sold us new laces and a lot of advice.",
    "The evening light over the estuary made everything look gold for about ten minutes.",
    "We missed the last ferry and ended up sharing a taxi with a choir on its way to a concert.",
    "The market in {t} was mostly vegetables, but one stall sold hand-carved spoons.",
    "Rain all day. We read, played cards, and planned tomorrow's route twice.",
)

# Building blocks for product reviews.
REVIEW_OPENERS: tuple[str, ...] = (
    "Bought the {p} for a trip last month.", "I have used the {p} daily for about six weeks.",
    "Got the {p} as a gift.", "Replaced my old {k} with the {p}.",
    "Ordered the {p} after reading a lot of reviews.",
)
REVIEW_POINTS: tuple[str, ...] = (
    "It arrived well packed and a day earlier than promised.",
    "The build quality feels solid, much better than the price suggests.",
    "The instructions were confusing and one screw was missing.",
    "After three weeks a seam started to come apart.",
    "Customer service replaced the faulty part without any argument.",
    "It is heavier than it looks in the photos.",
    "Does exactly what it says and nothing more, which is fine by me.",
    "The colour is a little different from the picture.",
    "Battery life is shorter than advertised, maybe two thirds.",
    "My partner, who hates gadgets, uses it more than I do.",
    "It is noisier than my old {k}, especially at night.",
    "Cleaning it is easy; everything comes apart without tools.",
)

# Building blocks for quarterly reports.
REGIONS: tuple[str, ...] = ("North", "South", "East", "West", "Central", "Coastal", "Highlands")
REPORT_SENTENCES: tuple[str, ...] = (
    "Revenue in the {r} region was {x} thousand, {d} on the same quarter last year.",
    "The {r} team opened {n} new accounts, mostly small businesses in {t}.",
    "Staff turnover in {r} remained low, with one departure and two new hires.",
    "Delivery times in {r} improved after the warehouse in {t} extended its hours.",
    "A key customer in {t} delayed a large order into next quarter, which explains most of the shortfall.",
    "Marketing spend in {r} was cut by a fifth without a visible effect on enquiries.",
    "The {r} region piloted the new pricing scheme; early results are mixed.",
    "Customer satisfaction in {r} rose to {p} per cent in the quarterly survey.",
)

# Self-written Python functions, used whole in code-review and code-explanation prompts.
CODE_SNIPPETS: tuple[str, ...] = (
    '''def moving_average(values, window):
    """Return the simple moving average of `values` over `window` items."""
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    total = 0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            out.append(total / window)
    return out
''',
    '''def parse_duration(text):
    """Parse '1h30m', '45s' or '2m' into seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    seconds = 0
    number = ""
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        elif ch in units and number:
            seconds += int(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"bad duration: {text!r}")
    if number:
        seconds += int(number)
    return seconds
''',
    '''class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}

    def get(self, key):
        if key not in self.items:
            return None
        value = self.items.pop(key)
        self.items[key] = value
        return value

    def put(self, key, value):
        if key in self.items:
            self.items.pop(key)
        elif len(self.items) >= self.capacity:
            oldest = next(iter(self.items))
            del self.items[oldest]
        self.items[key] = value
''',
    '''def merge_intervals(intervals):
    intervals = sorted(intervals)
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
''',
    '''def word_frequencies(path, top=10):
    counts = {}
    with open(path) as f:
        for line in f:
            for word in line.lower().split():
                word = word.strip(".,;:!?\\"'()")
                if word:
                    counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:top]
''',
    '''def retry(func, attempts=3, delay=0.5):
    import time
    for attempt in range(attempts):
        try:
            return func()
        except Exception as exc:
            last = exc
            time.sleep(delay * 2 ** attempt)
    raise last
''',
    '''def chunk(items, size):
    """Split a list into consecutive chunks of at most `size` items."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def flatten(nested):
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
''',
    '''def invoice_total(lines, tax_rate=0.2, discount=None):
    subtotal = sum(line["qty"] * line["unit_price"] for line in lines)
    if discount:
        subtotal = subtotal - discount
    tax = round(subtotal * tax_rate, 2)
    return {"subtotal": subtotal, "tax": tax, "total": subtotal + tax}
''',
    '''def validate_username(name):
    if len(name) < 3 or len(name) > 20:
        return False
    if not name[0].isalpha():
        return False
    for ch in name:
        if not (ch.isalnum() or ch in "_-"):
            return False
    return name.lower() not in ("admin", "root", "system")
''',
)

# Medium-length email drafts to be rewritten.
EMAIL_SENTENCES: tuple[str, ...] = (
    "I still haven't got the invoice you said you would send last week.",
    "The meeting on Thursday was a waste of time because nobody had read the document.",
    "Can you just fix the printer, it has been broken for ages.",
    "I need the numbers by tomorrow or we will miss the deadline again.",
    "Your team changed the schedule without telling anyone on ours.",
    "I'm not going to the training session, it clashes with my dentist appointment.",
    "The delivery came with two boxes crushed and one missing.",
    "We agreed on a budget of twelve thousand and the quote says fifteen.",
    "Please stop booking the large room for one-person calls.",
    "I've attached the draft, which still needs the figures from finance.",
)

# Warm-up requests. They start with words no measured prompt starts with (see chat_split.py).
WARMUP_CHAT: tuple[str, ...] = (
    "Warm-up check, not scored: reply with a short greeting and the word ready.",
    "Warm-up paragraph for the server to digest before measurement begins. ",
)

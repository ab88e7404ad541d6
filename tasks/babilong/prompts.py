"""BABILong prompts and answer labels, from booydar/babilong (babilong/prompts.py, babilong/metrics.py).

DEFAULT_PROMPTS (instruction, examples and post_prompt of qa1-qa20) and TASK_LABELS are the
reference's strings byte for byte (qa10-qa20's examples end with an opening "<context>\n", as there).
TEMPLATE is its DEFAULT_TEMPLATE; `format_prompt` is its get_formatted_input: the context stripped,
the whole prompt stripped. The leaderboard configuration is used: instruction, examples and
post_prompt all present (run_model_on_babilong.py --use_instruction --use_examples --use_post_prompt).
"""

from __future__ import annotations

TASK_TEMPLATE = "{instruction}\n\n{examples}\n\n{post_prompt}"
USER_TEMPLATE = "<context>\n{context}\n</context>\n\nQuestion: {question}"
TEMPLATE = TASK_TEMPLATE + "\n\n" + USER_TEMPLATE

# run_model_on_babilong.py generate_kwargs: greedy, 20 new tokens
MAX_NEW_TOKENS = 20

DEFAULT_PROMPTS: dict[str, dict[str, str]] = {
    "qa1": {
        "instruction": "I will give you context with the facts about positions of different persons hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location to answer the question.",
        "examples": "<example>\nCharlie went to the hallway. Judith come back to the kitchen. Charlie travelled to balcony. Where is Charlie?\nAnswer: The most recent location of Charlie is balcony.\n</example>\n\n<example>\nAlan moved to the garage. Charlie went to the beach. Alan went to the shop. Rouse travelled to balcony. Where is Alan?\nAnswer: The most recent location of Alan is shop.\n</example>",
        "post_prompt": "Always return your answer in the following format: The most recent location of ’person’ is ’location’. Do not write anything else after that.",
    },
    "qa2": {
        "instruction": "I give you context with the facts about locations and actions of different persons hidden in some random text and a question.You need to answer the question based only on the information from the facts.\nIf a person got an item in the first location and travelled to the second location the item is also in the second location. If a person dropped an item in the first location and moved to the second location the item remains in the first location.",
        "examples": "<example>\nCharlie went to the kitchen. Charlie got a bottle. Charlie moved to the balcony. Where is the bottle?\nAnswer: The bottle is in the balcony.\n</example>\n<example>\nAlan moved to the garage. Alan got a screw driver. Alan moved to the kitchen. Where is the screw driver?\nAnswer: The screw driver is in the kitchen.\n</example>",
        "post_prompt": "Always return your answer in the following format: The ’item’ is in ’location’. Do not write anything else after that.",
    },
    "qa3": {
        "instruction": "I give you context with the facts about locations and actions of different persons hidden in some random text and a question. You need to answer the question based only on the information from the facts.\nIf a person got an item in the first location and travelled to the second location the item is also in the second location. If a person dropped an item in the first location and moved to the second location the item remains in the first location.",
        "examples": "<example>\nJohn journeyed to the bedroom. Mary grabbed the apple. Mary went back to the bathroom. Daniel journeyed to the bedroom. Daniel moved to the garden. Mary travelled to the kitchen. Where was the apple before the kitchen?\nAnswer: Before the kitchen the apple was in the bathroom.\n</example>\n<example>\nJohn went back to the bedroom. John went back to the garden. John went back to the kitchen. Sandra took the football. Sandra travelled to the garden. Sandra journeyed to the bedroom. Where was the football before the bedroom?\nAnswer: Before the bedroom the football was in the garden.\n</example>",
        "post_prompt": "Always return your answer in the following format: Before the $location_1$ the $item$ was in the $location_2$. Do not write anything else after that.",
    },
    "qa4": {
        "instruction": "I will give you context with the facts about different people, their location and actions, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nThe hallway is south of the kitchen. The bedroom is north of the kitchen. What is the kitchen south of?\nAnswer: bedroom\n</example>\n<example>\nThe garden is west of the bedroom. The bedroom is west of the kitchen. What is west of the bedroom?\nAnswer: garden\n</example>",
        "post_prompt": "Your answer should contain only one word - location. Do not write anything else after that.",
    },
    "qa5": {
        "instruction": "I will give you context with the facts about locations and their relations hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nMary picked up the apple there. Mary gave the apple to Fred. Mary moved to the bedroom. Bill took the milk there. Who did Mary give the apple to?\nAnswer: Fred\n</example>\n<example>\nJeff took the football there. Jeff passed the football to Fred. Jeff got the milk there. Bill travelled to the bedroom. Who gave the football?\nAnswer: Jeff\n</example>\n<example>\nFred picked up the apple there. Fred handed the apple to Bill. Bill journeyed to the bedroom. Jeff went back to the garden. What did Fred give to Bill?\nAnswer: apple\n</example>",
        "post_prompt": "Your answer should contain only one word. Do not write anything else after that. Do not explain your answer.",
    },
    "qa6": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nJohn travelled to the hallway. John travelled to the garden. Is John in the garden?\nAnswer: yes\n</example>\n<example>\nMary went to the office. Daniel journeyed to the hallway. Mary went to the bedroom. Sandra went to the garden. Is Mary in the office?\nAnswer: no\n</example>\n",
        "post_prompt": "Your answer should contain only one word - $yes$ or $no$. Do not write anything else after that. Do not explain your answer.",
    },
    "qa7": {
        "instruction": "I will give you context with the facts about people and objects they carry, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nDaniel went to the bedroom. Daniel got the apple there. How many objects is Daniel carrying?\nAnswer: one\n</example>\n<example>\nMary grabbed the apple there. Mary gave the apple to John. How many objects is Mary carrying?\nAnswer: none\n</example>\n<example>\nSandra travelled to the hallway. Sandra picked up the milk there. Sandra took the apple there. Mary travelled to the garden. How many objects is Sandra carrying?\nAnswer: two\n</example>\n",
        "post_prompt": "Your answer should contain only one word - $none$ or $number_of_objects$. Do not write anything else after that. Do not explain your answer.",
    },
    "qa8": {
        "instruction": "I will give you context with the facts about people and objects they carry, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nSandra travelled to the garden. Mary grabbed the milk there. What is Mary carrying?\nAnswer: milk\n</example>\n<example>\nMary travelled to the kitchen. Sandra travelled to the office. John travelled to the office. Sandra discarded the milk there. What is Sandra carrying?\nAnswer: nothing\n</example>\n<example>\nDaniel grabbed the apple there. Mary went to the office. Daniel moved to the garden. Daniel grabbed the milk there. Mary went to the kitchen. What is Daniel carrying?\nAnswer: apple,milk\n</example>\n",
        "post_prompt": "Your answer should contain only one or two words: $nothing$ or $object$ or $object_1$, $object_2$. Do not write anything else. Do not explain your answer.",
    },
    "qa9": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nJohn is not in the bathroom. Sandra is not in the bedroom. Is John in the bathroom?\nAnswer: no\n</example>\n<example>\nMary journeyed to the kitchen. John is in the bedroom. Sandra is not in the garden. Is Mary in the kitchen?\nAnswer: yes\n</example>\n",
        "post_prompt": "Your answer should contain only one word - $yes$ or $no$. Do not write anything else. Do not explain your answer.",
    },
    "qa10": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nBill is in the kitchen. Julie is either in the school or the cinema. Is Bill in the bedroom?\nAnswer: no\n</example>\n<example>\nFred is in the bedroom. Mary is either in the school or the cinema. Is Mary in the school?\nAnswer: maybe\n</example>\n<example>\nFred is either in the kitchen or the park. Bill moved to the cinema. Is Bill in the cinema?\nAnswer: yes\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - $yes$ or $no$ or $maybe$. Do not write anything else. Do not explain your answer.",
    },
    "qa11": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nDaniel journeyed to the hallway. After that he journeyed to the garden. Where is Daniel?\nAnswer: garden\n</example>\n<example>\nMary moved to the office. Afterwards she journeyed to the kitchen. Daniel went to the hallway. Then he journeyed to the garden. Where is Mary?\nAnswer: kitchen\n</example>\n<example>\nSandra moved to the kitchen. After that she went back to the hallway. Sandra moved to the bedroom. Then she went to the hallway. Mary moved to the bedroom. Afterwards she travelled to the bathroom. Where is Sandra?\nAnswer: hallway\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - location. Do not write anything else after that. Do not explain your answer.",
    },
    "qa12": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nMary and Daniel travelled to the bathroom. John and Daniel travelled to the office. Where is Daniel?\nAnswer: office\n</example>\n<example>\nSandra and Mary went back to the office. Daniel and Sandra went to the bedroom. Sandra and Mary travelled to the hallway. John and Mary went to the kitchen. Where is Mary?\nAnswer: kitchen\n</example>\n<example>\nDaniel and Sandra went back to the hallway. Daniel and John moved to the office. Daniel and John moved to the garden. Daniel and Mary went back to the bathroom. Daniel and John went back to the kitchen. Daniel and Sandra went to the bathroom. Where is John?\nAnswer: kitchen\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - location. Do not write anything else after that. Do not explain your answer.",
    },
    "qa13": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nMary and Daniel travelled to the bathroom. Then they journeyed to the hallway. Where is Daniel?\nAnswer: hallway\n</example>\n<example>\nDaniel and Sandra travelled to the kitchen. After that they journeyed to the hallway. Mary and Daniel travelled to the bedroom. After that they travelled to the hallway. Where is Sandra?\nAnswer: hallway\n</example>\n<example>\nJohn and Mary moved to the bathroom. Then they travelled to the office. John and Mary went to the kitchen. Afterwards they went to the bedroom. John and Sandra moved to the bathroom. Following that they went back to the kitchen. Where is Mary?\nAnswer: bedroom\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - location. Do not write anything else after that. Do not explain your answer.",
    },
    "qa14": {
        "instruction": "I will give you context with the facts about people and their locations hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nBill went back to the cinema yesterday. Julie went to the school this morning. Fred went to the park yesterday. Yesterday Julie went to the office. Where was Julie before the school?\nAnswer: office\n</example>\n<example>\nThis morning Fred went to the kitchen. Fred journeyed to the bedroom yesterday. Mary travelled to the bedroom this morning. Yesterday Mary went to the cinema. Where was Mary before the bedroom?\nAnswer: cinema\n</example>\n<example>\nYesterday Julie went back to the park. Julie went to the bedroom this morning. Bill journeyed to the cinema yesterday. This morning Bill went back to the park. This evening Julie went to the school. This afternoon Julie went back to the park. Where was Julie before the bedroom?\nAnswer: park\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - location. Do not write anything else after that. Do not explain your answer.",
    },
    "qa15": {
        "instruction": "I will give you context with the facts about animals, their names and relations. The facts and a question are hidden in some random text. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nMice are afraid of wolves. Gertrude is a mouse. Cats are afraid of sheep. Winona is a mouse. Sheep are afraid of wolves. Emily is a mouse. Jessica is a wolf. What is gertrude afraid of?\nAnswer: wolf\n</example>\n<example>\nMice are afraid of wolves. Gertrude is a mouse. Cats are afraid of sheep. Winona is a mouse. Sheep are afraid of wolves. Emily is a mouse. Jessica is a wolf. What is jessica afraid of?\nAnswer: cat\n</example>\n<example>\nMice are afraid of cats. Wolves are afraid of sheep. Emily is a wolf. Cats are afraid of sheep. Gertrude is a wolf. Sheep are afraid of cats. Winona is a wolf. What is emily afraid of?\nAnswer: sheep\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - an animal species. Do not write anything else after that. Do not explain your answer.",
    },
    "qa16": {
        "instruction": "I will give you context with the facts about animals, their names and colors. The facts and a question are hidden in some random text. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nLily is a frog. Bernhard is a frog. Bernhard is green. Brian is a lion. Brian is white. Julius is a swan. Julius is green. Lily is green. Greg is a swan. What color is Greg?\nAnswer: green\n</example>\n<example>\nJulius is a lion. Lily is a rhino. Bernhard is a swan. Lily is white. Bernhard is green. Greg is a rhino. Greg is gray. Julius is white. Brian is a lion. What color is Brian?\nAnswer: white\n</example>\n<example>\nBrian is a rhino. Julius is a lion. Bernhard is a lion. Greg is a swan. Brian is gray. Greg is white. Lily is a rhino. Bernhard is yellow. Lily is gray. What color is Julius?\nAnswer: yellow\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - a color. Do not write anything else after that. Do not explain your answer.",
    },
    "qa17": {
        "instruction": "I will give you context with the facts about different figures, their location and colors, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nThe triangle is above the pink rectangle. The blue square is to the left of the triangle. Is the pink rectangle to the right of the blue square?\nAnswer: yes\n</example>\n<example>\nThe red sphere is to the left of the yellow square. The red sphere is below the pink rectangle. Is the pink rectangle to the left of the yellow square?\nAnswer: yes\n</example><example>\nThe red sphere is above the pink rectangle. The red sphere is to the right of the red square. Is the pink rectangle above the red square?\nAnswer: no\n</example>",
        "post_prompt": "Your answer should contain only one word - $yes$ or $no$. Do not write anything else. Do not explain your answer.",
    },
    "qa18": {
        "instruction": "I will give you context with the facts about different objects and their sizes, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nThe box of chocolates fits inside the chest. The box is bigger than the chest. The box is bigger than the suitcase. The suitcase fits inside the box. The container is bigger than the box of chocolates. Does the box fit in the box of chocolates?\nAnswer: no\n</example>\n<example>\nThe suitcase is bigger than the container. The container fits inside the box. The chest is bigger than the chocolate.The suitcase fits inside the box. The chest fits inside the box. Does the chocolate fit in the box?\nAnswer: yes\n</example><example>\nThe chocolate fits inside the box of chocolates. The suitcase fits inside the box. The chocolate fits inside the box. The box is bigger than the box of chocolates. The suitcase is bigger than the box of chocolates. Is the chocolate bigger than the box?\nAnswer: no\n</example>",
        "post_prompt": "Your answer should contain only one word - $yes$ or $no$. Do not write anything else. Do not explain your answer.",
    },
    "qa19": {
        "instruction": "I will give you context with the facts about different places and their locations, hidden in some random text and a question. You need to answer the question based only on the information from the facts.",
        "examples": "<example>\nThe office is east of the hallway. The kitchen is north of the office. The garden is west of the bedroom. The office is west of the garden. The bathroom is north of the garden. How do you go from the kitchen to the garden?\nAnswer: s,e\n</example>\n<example>\nThe bedroom is west of the hallway. The office is east of the garden. The garden is north of the kitchen. The kitchen is north of the bathroom. The hallway is west of the garden. How do you go from the kitchen to the hallway?\nAnswer: n,w\n</example>\n<example>\nThe bedroom is south of the hallway. The bathroom is east of the office. The kitchen is west of the garden. The garden is south of the office. The office is south of the bedroom. How do you go from the garden to the bedroom?\nAnswer: n,n\n</example>\n",
        "post_prompt": "Your answer should contain only two letters, separated by a comma - ordinal directions. You can choose the letters from $n$, $s$, $e$ and $w$. Do not write anything else after that.",
    },
    "qa20": {
        "instruction": "I will give you context with the facts about people, their locations and condition hidden in some random text and a question. You need to answer the question based only on the information from the facts. If a person was in different locations, use the latest location the person was in to answer the question.",
        "examples": "<example>\nSumit is tired. Where will sumit go?\nAnswer: bedroom\n</example>\n<example>\nYann is hungry. Yann journeyed to the kitchen. Why did yann go to the kitchen?\nAnswer: hungry\n</example>\n<example>\nAntoine is thirsty. Yann is tired. Yann went back to the bedroom. Yann picked up the pajamas there.Jason is thirsty. Antoine went back to the kitchen. Why did antoine go to the kitchen?\nAnswer: thirsty\n</example>\n<context>\n",
        "post_prompt": "Your answer should contain only one word - a person condition or a place. Do not write anything else after that. Do not explain your answer.",
    },
}

TASK_LABELS: dict[str, list[str]] = {
    "qa1": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa2": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa3": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa4": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa5": ["Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"],
    "qa6": ["no", "yes"],
    "qa7": ["none", "one", "three", "two"],
    "qa8": ["apple", "football", "milk", "nothing"],
    "qa9": ["no", "yes"],
    "qa10": ["maybe", "no", "yes"],
    "qa11": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa12": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa13": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa14": ["bedroom", "cinema", "kitchen", "office", "park", "school"],
    "qa15": ["cat", "mouse", "sheep", "wolf"],
    "qa16": ["gray", "green", "white", "yellow"],
    "qa17": ["no", "yes"],
    "qa18": ["no", "yes"],
    "qa19": ["e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w"],
    "qa20": ["bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"],
}


def format_prompt(task: str, context: str, question: str) -> str:
    p = DEFAULT_PROMPTS[task]
    return TEMPLATE.format(
        instruction=p["instruction"],
        examples=p["examples"],
        post_prompt=p["post_prompt"],
        context=context.strip(),
        question=question,
    ).strip()

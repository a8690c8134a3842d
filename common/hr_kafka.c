/* placeholder until the module lands */
typedef int hr_hr_kafka_placeholder;

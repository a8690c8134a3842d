/* placeholder until the module lands */
typedef int hr_hr_mysql_placeholder;
